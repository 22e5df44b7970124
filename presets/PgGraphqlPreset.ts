import { defaultPreset as graphileBuildPreset } from "graphile-build";
import { defaultPreset as graphileBuildPgPreset } from "graphile-build-pg";

/**
 * The pg_graphql shape as a Graphile preset: `extends: [PgGraphqlPreset]` in any PostGraphile v5 app.
 * Keeps graphile-build-pg's gather phase (codecs, resources, relations, RBAC) and replaces the schema
 * shape with one plugin per pg_graphql concern (plugins/).
 */
export const PgGraphqlPreset: GraphileConfig.Preset = {
  extends: [graphileBuildPreset, graphileBuildPgPreset],
  // pg_graphql exposes relations, filters and ordering whether or not an index backs them.
  disablePlugins: ["PgIndexBehaviorsPlugin"],
};

export default PgGraphqlPreset;
