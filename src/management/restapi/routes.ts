import { Router } from "express";
import { z } from "zod";
import { readRestapiConfig } from "../../catalog/dataApiConfig";
import type { AppContext } from "../../context";
import { kekOf } from "../../platform/kek";
import { mayReadSecrets } from "../http";
import { routeTable } from "../route";

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
  db_plan_enabled: z.boolean(),
});

async function jwtSecretOf(ctx: AppContext, ref: string): Promise<string> {
  const { rows } = await ctx.platformPool.query("select jwt_secret from platform.projects where ref = $1", [
    ref,
  ]);
  return kekOf(ctx.platformPool).open(rows[0].jwt_secret, "platform.projects.jwt_secret");
}

export function restapiRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  for (const spelling of ["restapi", "postgrest"]) {
    routes.get(
      `/v1/projects/:ref/${spelling}`,
      "Gets the REST layer's config, with the JWT secret for callers who may read secrets",
      {
        access: { permission: "data_api_config_read", scope: "rest:read" },
        status: 200,
        response: RestConfig.extend({ jwt_secret: z.string().optional() }),
      },
      async ({ req, project }) => {
        const config = await readRestapiConfig(ctx.platformPool, project.ref);
        // A read permission on the config is not a permission to read the secret that signs every key.
        if (!mayReadSecrets(req)) return config;
        return { ...config, jwt_secret: await jwtSecretOf(ctx, project.ref) };
      },
    );
    routes.patch(
      `/v1/projects/:ref/${spelling}`,
      "Updates the REST layer's config; /rest/v1 and /graphql/v1 honour it on the next request",
      {
        access: { permission: "data_api_config_write", scope: "rest:write" },
        body: RestConfigPatch,
        status: 200,
        response: RestConfig,
      },
      async ({ project, body }) => {
        await ctx.platformPool.query(
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
            project.ref,
            body.db_schema ?? null,
            body.db_extra_search_path ?? null,
            body.max_rows ?? null,
            body.db_pool ?? null,
            "db_pool" in body,
            body.db_plan_enabled ?? null,
          ],
        );
        project.invalidateSchema("restapi config");
        return readRestapiConfig(ctx.platformPool, project.ref);
      },
    );
  }
  return routes.router;
}
