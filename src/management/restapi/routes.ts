import { Router } from "express";
import type pg from "pg";
import { z } from "zod";
import { readRestapiConfig } from "../../catalog/dataApiConfig";
import type { AppContext } from "../../context";
import { mayReadSecrets } from "../http";
import { configDocumentRoutes } from "../configDocument";
import { routeTable } from "../route";
import { jwtSecretOf, writeRestapiConfig } from "./store";

/** The REST layer's configuration (`restapi`; the platform spells it `postgrest`). */

const SCHEMA_LIST = /^\s*[A-Za-z_][A-Za-z0-9_$]*(\s*,\s*[A-Za-z_][A-Za-z0-9_$]*)*\s*$/;

const RestConfigPatch = z
  .object({
    db_schema: z.string().regex(SCHEMA_LIST, "must be a comma-separated list of schema names").optional(),
    db_extra_search_path: z
      .string()
      .regex(
        /^\s*([A-Za-z_][A-Za-z0-9_$]*(\s*,\s*[A-Za-z_][A-Za-z0-9_$]*)*)?\s*$/,
        "must be a comma-separated list of schema names",
      )
      .optional(),
    max_rows: z.number().int().min(1).max(1_000_000).optional(),
    db_pool: z.number().int().min(1).max(1000).nullable().optional(),
    // Strata's addition, PostgREST's own setting: query plans for `Accept: application/vnd.pgrst.plan`.
    db_plan_enabled: z.boolean().optional(),
  })
  .strict();

const RestConfig = z.object({
  db_schema: z.string(),
  db_extra_search_path: z.string(),
  max_rows: z.number().int(),
  db_pool: z.number().int().nullable(),
  // The platform's field, which clients (the CLI's `config push`) require: null means its default, the data
  // pool's wait for a connection (10 s unless the installation sets another); Strata has no per-project value.
  db_pool_acquisition_timeout: z.null(),
  db_plan_enabled: z.boolean(),
});

const withPlatformFields = <T extends object>(config: T) => ({
  ...config,
  db_pool_acquisition_timeout: null,
});

export const REST_CONFIG_READ = { permission: "data_api_config_read", scope: "rest:read" };

/** The REST layer's config as GET .../postgrest answers it to a caller who may not read secrets. */
export async function restConfig(pool: pg.Pool, ref: string) {
  return withPlatformFields(await readRestapiConfig(pool, ref));
}

export function restapiRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const pool = ctx.platformPool;
  for (const spelling of ["restapi", "postgrest"]) {
    configDocumentRoutes(routes, {
      path: `/v1/projects/:ref/${spelling}`,
      store: {
        read: (ref) => readRestapiConfig(pool, ref),
        write: (ref, changes) => writeRestapiConfig(pool, ref, changes),
      },
      read: {
        summary: "Gets the REST layer's config, with the JWT secret for callers who may read secrets",
        access: REST_CONFIG_READ,
        response: RestConfig.extend({ jwt_secret: z.string().optional() }),
        // A read permission on the config is not a permission to read the secret that signs every key.
        answer: async (config, { req, project }) =>
          withPlatformFields(
            mayReadSecrets(req) ? { ...config, jwt_secret: await jwtSecretOf(pool, project.ref) } : config,
          ),
      },
      update: {
        method: "patch",
        summary: "Updates the REST layer's config; /rest/v1 and /graphql/v1 honour it on the next request",
        access: { permission: "data_api_config_write", scope: "rest:write" },
        body: RestConfigPatch,
        response: RestConfig,
        status: 200,
        answer: (config, { project }) => {
          project.invalidateSchema("restapi config");
          return withPlatformFields(config);
        },
      },
    });
  }
  return routes.router;
}
