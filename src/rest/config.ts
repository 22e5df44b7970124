import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";

/** The REST layer's settings of a project (Management API `restapi`), with the platform's defaults. */
export interface RestConfig {
  /** Exposed schemas; the first is the default profile. */
  schemas: string[];
  extraSearchPath: string[];
  maxRows: number | null;
}

const DEFAULTS: RestConfig = {
  schemas: ["public"],
  extraSearchPath: ["public", "extensions"],
  maxRows: 1000,
};

const list = (text: string) =>
  text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

async function loadRestConfig(ctx: AppContext, ref: string): Promise<RestConfig> {
  const { rows } = await ctx.platformPool.query(
    "select db_schema, db_extra_search_path, max_rows from platform.restapi_config where project_ref = $1",
    [ref],
  );
  if (rows.length === 0) return DEFAULTS;
  return {
    schemas: list(rows[0].db_schema),
    extraSearchPath: list(rows[0].db_extra_search_path),
    maxRows: rows[0].max_rows,
  };
}

/** Cached with the project's schema caches: a PATCH of the config invalidates them. */
export function restConfigOf(ctx: AppContext, project: ProjectRuntime): Promise<RestConfig> {
  let cached = project.caches.get("rest:config") as Promise<RestConfig> | undefined;
  if (!cached) {
    cached = loadRestConfig(ctx, project.ref);
    project.caches.set("rest:config", cached);
    cached.catch(() => project.caches.delete("rest:config"));
  }
  return cached;
}
