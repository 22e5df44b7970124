import type { PgCodec, PgCodecRelation, PgRegistry } from "@dataplan/pg";
import { attributeDirectives, codecDirectives, relationDirectives } from "./PgGqlDirectivesPlugin";

declare global {
  namespace GraphileBuild {
    interface Inflection {
      /** pg_graphql's base name of a table, view or enum: the `name` directive, else the SQL name (PascalCase when inflecting). */
      pgGqlBaseName(this: Inflection, codec: PgCodec): string;
      /** `<T>Filter` */
      pgGqlFilterType(this: Inflection, typeName: string): string;
      /** `<T>OrderBy` */
      pgGqlOrderByType(this: Inflection, typeName: string): string;
      /** `IntFilter`, `StringListFilter`, ... */
      pgGqlScalarFilterType(this: Inflection, scalarName: string, isList: boolean): string;
      /** Does the schema of this codec ask for `inflect_names`? */
      pgGqlInflects(this: Inflection, codec: PgCodec): boolean;
    }
  }
}

/** pg_graphql `to_base_type_name`: `account_BY_email` → `AccountBYEmail` when inflecting. */
export function toBaseTypeName(sqlName: string, inflect: boolean): string {
  if (!inflect) return sqlName;
  let out = "";
  let prev = "+";
  for (const ch of sqlName) {
    out += /[\p{L}\p{N}]/u.test(prev) ? ch : ch.toUpperCase();
    prev = ch;
  }
  return out.replace(/_/g, "");
}

export function lowercaseFirstLetter(token: string): string {
  return token.slice(0, 1).toLowerCase() + token.slice(1);
}

function relationOf(registry: PgRegistry, codec: PgCodec, relationName: string): PgCodecRelation | undefined {
  return (registry.pgRelations as Record<string, Record<string, PgCodecRelation>>)[codec.name]?.[
    relationName
  ];
}

/**
 * Every name of the pg_graphql shape comes from here (ports of pg_graphql's naming rules):
 * types `<T>`, `<T>Connection`, `<T>Edge`, `<T>Filter`, `<T>OrderBy`, `<T>InsertInput`,
 * `<T>UpdateInput`; fields `<t>Collection`, `<t>ByPk`, columns, relationships and `nodeId`.
 */
export const PgGqlInflectionPlugin: GraphileConfig.Plugin = {
  name: "PgGqlInflectionPlugin",
  description: "pg_graphql naming: no inflection by default, inflect_names and name overrides",
  version: "0.1.0",
  inflection: {
    add: {
      pgGqlInflects(_options, codec) {
        return codecDirectives(codec)?.schema.inflect_names === true;
      },
      pgGqlBaseName(_options, codec) {
        const pgGql = codecDirectives(codec);
        if (pgGql?.entity.name) return pgGql.entity.name;
        return toBaseTypeName(pgGql?.sqlName ?? codec.name, this.pgGqlInflects(codec));
      },
      pgGqlFilterType(_options, typeName) {
        return `${typeName}Filter`;
      },
      pgGqlOrderByType(_options, typeName) {
        return `${typeName}OrderBy`;
      },
      pgGqlScalarFilterType(_options, scalarName, isList) {
        return isList ? `${scalarName}ListFilter` : `${scalarName}Filter`;
      },
    },
    replace: {
      tableType(_previous, _options, codec) {
        return this.pgGqlBaseName(codec);
      },
      enumType(_previous, _options, codec) {
        return this.pgGqlBaseName(codec);
      },
      enumValue(_previous, _options, value, codec) {
        return codecDirectives(codec)?.entity.mappings?.[value] ?? value;
      },
      connectionType(_previous, _options, typeName) {
        return `${typeName}Connection`;
      },
      edgeType(_previous, _options, typeName) {
        return `${typeName}Edge`;
      },
      inputType(_previous, _options, typeName) {
        return `${typeName}InsertInput`;
      },
      patchType(_previous, _options, typeName) {
        return `${typeName}UpdateInput`;
      },
      attribute(_previous, _options, { codec, attributeName }) {
        const attribute = codec.attributes[attributeName];
        const override = attributeDirectives(attribute).name;
        if (override) return override;
        const inflect = this.pgGqlInflects(codec);
        const base = toBaseTypeName(attributeName, inflect);
        return inflect ? lowercaseFirstLetter(base) : base;
      },
      allRowsConnection(_previous, _options, resource) {
        return `${lowercaseFirstLetter(this.tableType(resource.codec))}Collection`;
      },
      rowByUnique(_previous, _options, { resource }) {
        return `${lowercaseFirstLetter(this.tableType(resource.codec))}ByPk`;
      },
      nodeIdFieldName() {
        return "nodeId";
      },
      singleRelation(_previous, _options, details) {
        return pgGqlRelationFieldName(this, details.registry, details.codec, details.relationName);
      },
      singleRelationBackwards(_previous, _options, details) {
        return pgGqlRelationFieldName(this, details.registry, details.codec, details.relationName);
      },
      manyRelationConnection(_previous, _options, details) {
        return pgGqlRelationFieldName(this, details.registry, details.codec, details.relationName);
      },
    },
  },
};

/** pg_graphql `graphql_foreign_key_field_name`, for both directions of a foreign key. */
function pgGqlRelationFieldName(
  inflection: GraphileBuild.Inflection,
  registry: PgRegistry,
  codec: PgCodec,
  relationName: string,
): string {
  const relation = relationOf(registry, codec, relationName);
  if (!relation) return relationName;
  const directives = relationDirectives(relation);
  const override = relation.isReferencee ? directives.local_name : directives.foreign_name;
  if (override) return override;
  const target = relation.remoteResource.codec;
  const inflect = inflection.pgGqlInflects(target);
  const baseAsField = lowercaseFirstLetter(inflection.pgGqlBaseName(target));
  const isUnique = !relation.isReferencee || relation.isUnique;
  if (!isUnique) return `${baseAsField}Collection`;
  const columns = relation.localAttributes;
  if (columns.length !== 1) return baseAsField;
  const stripped = inflect
    ? columns[0].endsWith("_id")
      ? columns[0].slice(0, -3)
      : undefined
    : columns[0].endsWith("Id")
      ? columns[0].slice(0, -2)
      : undefined;
  return stripped === undefined ? baseAsField : lowercaseFirstLetter(toBaseTypeName(stripped, inflect));
}
