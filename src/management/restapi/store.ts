import type pg from "pg";
import { readRestapiConfig, type RestapiConfigRow } from "../../catalog/dataApiConfig";
import { kekOf } from "../../platform/kek";

/** The project's row of platform.restapi_config (read by src/catalog/dataApiConfig.ts). */

/** Sets the fields `changes` names (an absent one keeps its value; `db_pool` may be set to null). */
export async function writeRestapiConfig(
  pool: pg.Pool,
  ref: string,
  changes: Partial<RestapiConfigRow>,
): Promise<RestapiConfigRow> {
  await pool.query(
    `insert into platform.restapi_config
       (project_ref, db_schema, db_extra_search_path, max_rows, db_pool, db_plan_enabled)
     values ($1, coalesce($2, 'public'), coalesce($3, 'public, extensions'), coalesce($4, 1000), $5,
       coalesce($7, false))
     on conflict (project_ref) do update set
       db_schema = coalesce($2, restapi_config.db_schema),
       db_extra_search_path = coalesce($3, restapi_config.db_extra_search_path),
       max_rows = coalesce($4, restapi_config.max_rows),
       db_pool = case when $6 then $5 else restapi_config.db_pool end,
       db_plan_enabled = coalesce($7, restapi_config.db_plan_enabled),
       updated_at = now()`,
    [
      ref,
      changes.db_schema ?? null,
      changes.db_extra_search_path ?? null,
      changes.max_rows ?? null,
      changes.db_pool ?? null,
      "db_pool" in changes,
      changes.db_plan_enabled ?? null,
    ],
  );
  return readRestapiConfig(pool, ref);
}

/** The project's JWT secret, opened. */
export async function jwtSecretOf(pool: pg.Pool, ref: string): Promise<string> {
  const { rows } = await pool.query("select jwt_secret from platform.projects where ref = $1", [ref]);
  return kekOf(pool).open(rows[0].jwt_secret, "platform.projects.jwt_secret");
}
