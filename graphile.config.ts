import { PgGraphqlPreset } from "./presets/PgGraphqlPreset";
import { StrataServerPreset } from "./presets/StrataServerPreset";

/**
 * The preset file users edit. Strata adds the database connection (one service per project and role) at
 * run time; environment variables override the `strata` options below.
 */
const preset: GraphileConfig.Preset & { strata?: { port?: number; domain?: string } } = {
  extends: [PgGraphqlPreset, StrataServerPreset],
  strata: {},
};

export default preset;
