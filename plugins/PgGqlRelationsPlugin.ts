import type { PgCodecRelation, PgCodecWithAttributes } from "@dataplan/pg";

/**
 * pg_graphql's nullability of to-one relationships: the referenced row is non-null when every
 * column of the foreign key is NOT NULL; the reverse side of a one-to-one is always nullable.
 */
export const PgGqlRelationsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlRelationsPlugin",
  description: "pg_graphql nullability of relationship fields",
  version: "0.1.0",
  after: ["PgRelationsPlugin"],
  schema: {
    hooks: {
      GraphQLObjectType_fields_field(field, build, context) {
        const { isPgSingleRelationField, pgRelationDetails, pgCodec } = context.scope;
        if (!isPgSingleRelationField || !pgRelationDetails || !pgCodec?.attributes) return field;
        const relation = (
          pgRelationDetails.registry.pgRelations as Record<string, Record<string, PgCodecRelation>>
        )[pgRelationDetails.codec.name]?.[pgRelationDetails.relationName];
        if (!relation || relation.isReferencee) return field;
        const attributes = (pgCodec as PgCodecWithAttributes).attributes;
        const required = relation.localAttributes.every((a) => attributes[a]?.notNull);
        if (!required) return field;
        return {
          ...field,
          type: new build.graphql.GraphQLNonNull(build.graphql.getNullableType(field.type)),
        };
      },
    },
  },
};
