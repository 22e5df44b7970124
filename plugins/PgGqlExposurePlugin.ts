import type { PgResource, PgResourceUnique } from "@dataplan/pg";

function primaryKeyOf(resource: PgResource): PgResourceUnique | undefined {
  return (resource.uniques as PgResourceUnique[] | undefined)?.find((u) => u.isPrimary);
}

/**
 * pg_graphql's exposure rules as behaviors: only tables (and views given a primary key) with a
 * primary key exist; the primary key is the only unique with a `<t>ByPk` entry point; functions
 * returning rows and other non-table resources are left to other plugins.
 */
export const PgGqlExposurePlugin: GraphileConfig.Plugin = {
  name: "PgGqlExposurePlugin",
  description: "Exposes only resources with a primary key, with pg_graphql's entry points",
  version: "0.1.0",
  schema: {
    entityBehavior: {
      pgResource: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlExposure"],
          callback(behavior, resource) {
            if (resource.parameters || resource.isUnique || resource.isVirtual) return behavior;
            if (!resource.codec.attributes) return behavior;
            return primaryKeyOf(resource as PgResource) ? behavior : [behavior, "-*"];
          },
        },
      },
      pgResourceUnique: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlExposure"],
          callback(behavior, [, unique]) {
            return (unique as PgResourceUnique).isPrimary ? behavior : [behavior, "-single"];
          },
        },
      },
    },
  },
};
