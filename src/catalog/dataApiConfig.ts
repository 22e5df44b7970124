import type pg from "pg";
import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";

/**
 * A project's data API settings (Management API `restapi`, stored in platform.restapi_config): which schemas
 * GraphQL and REST expose, REST's extra search path and row cap. The one reader of that row.
 */

/** The row as stored, the platform's defaults filled in (the Management API answers it as is). */
export interface RestapiConfigRow {
  db_schema: string;
  db_extra_search_path: string;
  max_rows: number;
  db_pool: number | null;
  db_plan_enabled: boolean;
}

/** The settings as the data APIs use them. */
export interface DataApiConfig {
  /** Exposed schemas; the first is REST's default profile. */
  schemas: string[];
  extraSearchPath: string[];
  maxRows: number;
  /** `Accept: application/vnd.pgrst.plan` answers a query plan (off unless the project turns it on). */
  planEnabled: boolean;
}

const DEFAULT_ROW: RestapiConfigRow = {
  db_schema: "public",
  db_extra_search_path: "public, extensions",
  max_rows: 1000,
  db_pool: null,
  db_plan_enabled: false,
};

export async function readRestapiConfig(platformPool: pg.Pool, ref: string): Promise<RestapiConfigRow> {
  const { rows } = await platformPool.query<RestapiConfigRow>(
    `select db_schema, db_extra_search_path, max_rows, db_pool, db_plan_enabled
       from platform.restapi_config where project_ref = $1`,
    [ref],
  );
  return rows[0] ?? DEFAULT_ROW;
}

const list = (text: string) =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

async function loadDataApiConfig(ctx: AppContext, ref: string): Promise<DataApiConfig> {
  const row = await readRestapiConfig(ctx.platformPool, ref);
  const schemas = list(row.db_schema);
  return {
    schemas: schemas.length ? schemas : ["public"],
    extraSearchPath: list(row.db_extra_search_path),
    maxRows: row.max_rows,
    planEnabled: row.db_plan_enabled,
  };
}

/** Cached with the project's schema caches: a PATCH of the config invalidates them. */
export function dataApiConfigOf(ctx: AppContext, project: ProjectRuntime): Promise<DataApiConfig> {
  let cached = project.caches.get("catalog:config") as Promise<DataApiConfig> | undefined;
  if (!cached) {
    cached = loadDataApiConfig(ctx, project.ref);
    project.caches.set("catalog:config", cached);
    cached.catch(() => project.caches.delete("catalog:config"));
  }
  return cached;
}
