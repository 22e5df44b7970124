import type { PgCodecWithAttributes, PgResource, PgResourceUnique } from "@dataplan/pg";
import type { GraphQLDirective } from "grafast/graphql";

/**
 * pg_graphql's fixed description texts for the elements graphile's stock plugins build (root types,
 * `node`, `<t>ByPk`, `<t>Collection`, `nodeId`, relationships, connection, edge and page info types,
 * `@include`/`@skip`). Where pg_graphql has no text the description is null, so introspection matches it
 * exactly; user `description` directives (tables, columns) come from PgGqlDirectivesPlugin untouched.
 * Plugins that add their own elements (filters, ordering, mutations, aggregates) set their texts themselves.
 */
export const PgGqlDescriptionsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlDescriptionsPlugin",
  description: "pg_graphql's description texts on the stock schema elements",
  version: "0.1.0",
  after: [
    "NodePlugin",
    "PgAllRowsPlugin",
    "PgRowByUniquePlugin",
    "PgRelationsPlugin",
    "ConnectionPlugin",
    "PgGqlIntrospectionPlugin",
  ],
  schema: {
    hooks: {
      GraphQLObjectType(config, _build, context) {
        const { isRootQuery, isRootMutation, isConnectionType, isConnectionEdgeType, isPageInfo } =
          context.scope;
        if (isRootQuery) return { ...config, description: "The root type for querying data" };
        if (isRootMutation) return { ...config, description: "The root type for creating and mutating data" };
        if (isConnectionType || isConnectionEdgeType || isPageInfo) return { ...config, description: null };
        return config;
      },
      GraphQLInterfaceType(config) {
        return config.name === "Node" ? { ...config, description: null } : config;
      },
      GraphQLInterfaceType_fields_field(field, build, context) {
        if (context.Self.name !== "Node" || context.scope.fieldName !== build.inflection.nodeIdFieldName()) {
          return field;
        }
        return { ...field, description: "Retrieves a record by `ID`" };
      },
      GraphQLObjectType_fields_field(field, build, context) {
        const { scope } = context;
        const { fieldName } = scope;
        if (scope.isRootNodeField) return { ...field, description: "Retrieve a record by its `ID`" };
        if (scope.isPgRowByUniqueConstraintField && scope.pgFieldResource) {
          const typeName = build.inflection.tableType(scope.pgFieldResource.codec as PgCodecWithAttributes);
          return { ...field, description: `Retrieve a record of type \`${typeName}\` by its primary key` };
        }
        if (scope.isRootQuery && scope.isPgFieldConnection && scope.pgFieldResource) {
          const typeName = build.inflection.tableType(scope.pgFieldResource.codec as PgCodecWithAttributes);
          return { ...field, description: `A pagable collection of type \`${typeName}\`` };
        }
        if (scope.isPgSingleRelationField || scope.isPgManyRelationConnectionField) {
          return { ...field, description: null };
        }
        const { isPgClassType, isConnectionType, isConnectionEdgeType, isPageInfo } = scope;
        if (isPgClassType && fieldName === build.inflection.nodeIdFieldName()) {
          return { ...field, description: "Globally Unique Record Identifier" };
        }
        if (isConnectionEdgeType || isPageInfo) return { ...field, description: null };
        if (isConnectionType && (fieldName === "edges" || fieldName === "pageInfo")) {
          return { ...field, description: null };
        }
        return field;
      },
      GraphQLObjectType_fields_field_args_arg(arg, build, context) {
        const { scope } = context;
        if (scope.isRootNodeField) return { ...arg, description: "The record's `ID`" };
        if (scope.isPgRowByUniqueConstraintField && scope.pgFieldResource) {
          const column = byPkColumnOf(
            scope.pgFieldResource,
            scope.pgFieldResourceUnique,
            scope.argName,
            build,
          );
          if (column) return { ...arg, description: `The record's \`${column}\` value` };
        }
        return arg;
      },
      GraphQLSchema(config, build) {
        return { ...config, directives: config.directives?.map((d) => pgGqlDirective(build, d)) };
      },
    },
  },
};

/** The SQL column behind a `<t>ByPk` argument (pg_graphql names the column, not the argument). */
function byPkColumnOf(
  resource: PgResource,
  unique: PgResourceUnique | undefined,
  argName: string,
  build: GraphileBuild.Build,
): string | undefined {
  const codec = resource.codec as PgCodecWithAttributes;
  return unique?.attributes.find(
    (attributeName) => build.inflection.attribute({ codec, attributeName }) === argName,
  );
}

const DIRECTIVE_TEXTS: Record<string, { description: string; ifArg: string }> = {
  include: {
    description: "This field or fragment will be included only when the `if` argument is true.",
    ifArg: "Included when true",
  },
  skip: {
    description: "This field or fragment will be skipped when the `if` argument is true.",
    ifArg: "Skipped when true",
  },
};

/** `@include`/`@skip` with pg_graphql's texts (same name and behaviour, so validation and execution are unchanged). */
function pgGqlDirective(build: GraphileBuild.Build, directive: GraphQLDirective): GraphQLDirective {
  const texts = DIRECTIVE_TEXTS[directive.name];
  if (!texts) return directive;
  const config = directive.toConfig();
  return new build.graphql.GraphQLDirective({
    ...config,
    description: texts.description,
    args: { ...config.args, if: { ...config.args.if, description: texts.ifArg } },
  });
}
