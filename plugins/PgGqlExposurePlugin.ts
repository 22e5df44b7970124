import { TYPES, type PgCodec, type PgResource, type PgResourceUnique } from "@dataplan/pg";

/** Column types pg_graphql accepts as `<t>ByPk` arguments (others, like bool or float keys, get none). */
const BY_PK_TYPES = new Set<PgCodec>([
  TYPES.int2,
  TYPES.int,
  TYPES.bigint,
  TYPES.text,
  TYPES.varchar,
  TYPES.bpchar,
  TYPES.citext,
  TYPES.uuid,
]);

/** GraphQL's name grammar: pg_graphql leaves out whatever would get another name. */
const GRAPHQL_NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

export function isValidGraphqlName(name: string): boolean {
  return GRAPHQL_NAME.test(name);
}

function primaryKeyOf(resource: PgResource): PgResourceUnique | undefined {
  return (resource.uniques as PgResourceUnique[] | undefined)?.find((u) => u.isPrimary);
}

/** A table (or keyed view) pg_graphql exposes: it has a primary key and a valid type name. */
function isExposedTable(resource: PgResource, build: GraphileBuild.Build): boolean {
  return Boolean(primaryKeyOf(resource)) && isValidGraphqlName(build.inflection.tableType(resource.codec));
}

/**
 * pg_graphql's exposure rules as behaviors: only tables (and views given a primary key) with a
 * primary key exist; the primary key is the only unique with a `<t>ByPk` entry point; tables and
 * columns whose GraphQL name would not be a valid name are left out; functions returning rows and
 * other non-table resources are left to other plugins.
 */
export const PgGqlExposurePlugin: GraphileConfig.Plugin = {
  name: "PgGqlExposurePlugin",
  description: "Exposes only resources with a primary key, with pg_graphql's entry points",
  version: "0.1.0",
  schema: {
    entityBehavior: {
      // A table type with an invalid name is never registered (other plugins look types up by name).
      pgCodec: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlExposure"],
          callback(behavior, codec, build) {
            if (!codec.attributes || isValidGraphqlName(build.inflection.tableType(codec))) return behavior;
            return [behavior, "-table"];
          },
        },
      },
      pgResource: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlExposure"],
          callback(behavior, resource, build) {
            if (resource.parameters || resource.isUnique || resource.isVirtual) return behavior;
            if (!resource.codec.attributes) return behavior;
            const exposed =
              primaryKeyOf(resource as PgResource) &&
              isValidGraphqlName(build.inflection.tableType(resource.codec));
            return exposed ? behavior : [behavior, "-*"];
          },
        },
      },
      pgCodecAttribute: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlExposure"],
          callback(behavior, [codec, attributeName], build) {
            // Composite-typed columns are not exposed by pg_graphql.
            if (codec.attributes[attributeName].codec.attributes) return [behavior, "-*"];
            const name = build.inflection.attribute({ codec, attributeName });
            if (!isValidGraphqlName(name)) return [behavior, "-*"];
            // Two columns inflecting to one field name (`_id` and `id`): the later column wins, as in pg_graphql.
            const names = Object.keys(codec.attributes);
            const shadowed = names
              .slice(names.indexOf(attributeName) + 1)
              .some((other) => build.inflection.attribute({ codec, attributeName: other }) === name);
            return shadowed ? [behavior, "-*"] : behavior;
          },
        },
      },
      pgResourceUnique: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlExposure"],
          callback(behavior, [resource, unique], build) {
            const { isPrimary, attributes } = unique as PgResourceUnique;
            const keyable = attributes.every((a) => BY_PK_TYPES.has(resource.codec.attributes?.[a]?.codec));
            return isPrimary && keyable && isExposedTable(resource as PgResource, build)
              ? behavior
              : [behavior, "-single"];
          },
        },
      },
    },
  },
};
