import { escapeSqlIdentifier } from "pg-sql2";
import type { PgClass } from "pg-introspection";
import { entityDirectiveError, parseDirectives, type EntityDirectives } from "./PgGqlDirectivesPlugin";
import { PgGqlError } from "./pgGqlErrors";

// Smart-tag specs spell names as SQL identifiers.
const quote = escapeSqlIdentifier;
const columnList = (names: readonly string[] | string) =>
  (Array.isArray(names) ? names : [names]).map(quote).join(",");

/**
 * Views, materialized views and foreign tables have no constraints; pg_graphql reads their keys from
 * the `primary_key_columns` and `foreign_keys` directives (the latter also on tables referencing views). This plugin turns those into the smart tags
 * graphile-build-pg's PgFakeConstraintsPlugin understands, so they become real uniques and relations
 * (relationship names travel as a `@graphql` directive on the fake constraint).
 */
export const PgGqlViewKeysPlugin: GraphileConfig.Plugin = {
  name: "PgGqlViewKeysPlugin",
  description: "pg_graphql primary_key_columns and foreign_keys directives on views",
  version: "0.1.0",
  before: ["PgFakeConstraintsPlugin"],
  gather: {
    hooks: {
      pgIntrospection_introspection(_info, { introspection }) {
        for (const pgClass of introspection.classes as PgClass[]) {
          const isTable = pgClass.relkind === "r" || pgClass.relkind === "p";
          const directives = parseDirectives<EntityDirectives>(pgClass.getDescription());
          const shapeError = entityDirectiveError(directives);
          if (shapeError) {
            throw new PgGqlError(`Error while loading schema, check comment directives. ${shapeError}`);
          }
          const { primary_key_columns: primaryKey, foreign_keys: foreignKeys } = directives;
          if (!Array.isArray(primaryKey) && !Array.isArray(foreignKeys)) continue;
          const tags = pgClass.getTagsAndDescription().tags as Record<string, unknown>;
          if (!isTable && Array.isArray(primaryKey) && primaryKey.length) {
            tags.primaryKey = primaryKey.join(",");
          }
          if (Array.isArray(foreignKeys) && foreignKeys.length) {
            tags.foreignKey = foreignKeys.map((fk) => {
              const names = JSON.stringify({ local_name: fk.local_name, foreign_name: fk.foreign_name });
              return `(${columnList(fk.local_columns)}) references ${quote(fk.foreign_schema)}.${quote(fk.foreign_table)} (${columnList(fk.foreign_columns)})|@graphql(${names})`;
            });
          }
        }
      },
    },
  },
};
