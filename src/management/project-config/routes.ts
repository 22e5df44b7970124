import { createHmac } from "node:crypto";
import http from "node:http";
import type { Router } from "express";
import type { AppContext } from "../../context";
import { authSettings } from "../../auth/authConfig";
import { isSecretAuthField } from "../../platform/kek";
import { HttpError } from "../http";
import { routeTable } from "../route";

/**
 * GET /v2/projects/{ref}/config: the project's database, pooler, auth, Data API, realtime and storage config in
 * one document, as the CLI's `config pull`, `config diff` and `config push` read it. Each section is what the
 * family's own v1 GET answers the same caller (asked of this server with the caller's token, so each family's
 * access rule applies as it is), in the v2 names; auth secrets are HMAC-SHA256 of their value keyed by the
 * project ref, as the CLI hashes its local ones to compare. Values Strata has no setting for are reported as
 * what it does (no CDN cache to purge; PostgREST's and PgBouncer's defaults).
 */

type Json = Record<string, any>;

/** One v1 GET of this server as the caller, answered as JSON; its refusal is the caller's. */
function v1Get(ctx: AppContext, authorization: string, path: string): Promise<Json> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port: ctx.config.port, method: "GET", path, headers: { authorization } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => {
          try {
            const body = text ? JSON.parse(text) : {};
            const status = res.statusCode ?? 500;
            if (status >= 400)
              reject(new HttpError(status < 500 ? status : 500, `${path}: ${body.message ?? status}`));
            else resolve(body);
          } catch (e) {
            reject(e);
          }
        });
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const cidrs = (v4: string[] = [], v6: string[] = []) => [
  ...v4.map((address) => ({ address, type: "v4" })),
  ...v6.map((address) => ({ address, type: "v6" })),
];

function database(project: Json, ssl: Json, network: Json, postgres: Json) {
  const { "cron.log_statement": cronLogStatement, ...settings } = postgres;
  return {
    major_version: Number(String(project.database?.version ?? "").split(".")[0]) || 0,
    ssl_enforced: ssl.currentConfig?.database === true,
    network_restrictions: {
      entitlement: network.entitlement,
      status: network.status,
      allowed_cidrs: cidrs(network.config?.dbAllowedCidrs, network.config?.dbAllowedCidrsV6),
      updated_at: network.updated_at ?? null,
      applied_at: network.status === "applied" ? (network.updated_at ?? null) : null,
    },
    postgres_settings: { ...settings, cron_log_statement: cronLogStatement },
  };
}

const pooler = (p: Json) => ({
  pool_mode: p.pool_mode,
  ignore_startup_parameters: p.ignore_startup_parameters ?? "",
  server_idle_timeout: p.server_idle_timeout,
  server_lifetime: p.server_lifetime ?? 3600,
  query_wait_timeout: p.query_wait_timeout,
  reserve_pool_size: p.reserve_pool_size,
  default_pool_size: p.default_pool_size,
  max_client_conn: p.max_client_conn,
});

const api = (p: Json) => ({
  db_schema: p.db_schema,
  db_extra_search_path: p.db_extra_search_path,
  max_rows: p.max_rows,
  db_pool_acquisition_timeout: p.db_pool_acquisition_timeout ?? 10,
  db_pool: p.db_pool ?? null,
});

const realtime = (r: Json) => ({ ...r, postgres_changes_pool: r.postgres_changes_pool ?? null });

function storage(s: Json) {
  const f = s.features ?? {};
  return {
    file_size_limit: s.fileSizeLimit,
    features: {
      image_transformation: { enabled: f.imageTransformation?.enabled === true },
      s3_protocol: { enabled: f.s3Protocol?.enabled === true },
      purge_cache: { enabled: false },
      iceberg_catalog: {
        enabled: f.icebergCatalog?.enabled === true,
        max_namespaces: f.icebergCatalog?.maxNamespaces,
        max_tables: f.icebergCatalog?.maxTables,
        max_catalogs: f.icebergCatalog?.maxCatalogs,
      },
      vector_buckets: {
        enabled: f.vectorBuckets?.enabled === true,
        max_buckets: f.vectorBuckets?.maxBuckets,
        max_indexes: f.vectorBuckets?.maxIndexes,
      },
    },
    capabilities: s.capabilities,
    upstream_target: s.external?.upstreamTarget ?? "main",
    migration_version: s.migrationVersion ?? "",
    database_pool_mode: s.databasePoolMode ?? "",
  };
}

/** The auth config as v1 answers it, each secret that is set answered as its HMAC (never the value). */
async function auth(ctx: AppContext, ref: string, config: Json): Promise<Json> {
  const opened = await authSettings(ctx.platformPool, ref);
  const out: Json = { ...config };
  for (const field of Object.keys(out)) {
    if (!isSecretAuthField(field)) continue;
    const value = (opened as Json)[field];
    out[field] =
      typeof value === "string" && value !== ""
        ? createHmac("sha256", ref).update(value).digest("hex")
        : null;
  }
  return out;
}

export function projectConfigRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  routes.get(
    "/v2/projects/:ref/config",
    "Gets the project's database, pooler, auth, Data API, realtime and storage config in one document (each " +
      "section as its v1 GET answers the caller; auth secrets as HMAC-SHA256 of their value keyed by the ref)",
    { access: { permission: "project_admin_read", scope: "projects:read" }, status: 200 },
    async ({ req, project }) => {
      const base = `/v1/projects/${project.ref}`;
      const get = (path: string) => v1Get(ctx, req.get("authorization") ?? "", `${base}${path}`);
      const [
        detail,
        ssl,
        network,
        postgres,
        pgbouncer,
        authConfig,
        postgrest,
        realtimeConfig,
        storageConfig,
      ] = await Promise.all([
        get(""),
        get("/ssl-enforcement"),
        get("/network-restrictions"),
        get("/config/database/postgres"),
        get("/config/database/pgbouncer"),
        get("/config/auth"),
        get("/postgrest"),
        get("/config/realtime"),
        get("/config/storage"),
      ]);
      return {
        data: {
          type: "project_config",
          id: project.ref,
          attributes: {
            database: database(detail, ssl, network, postgres),
            pooler: pooler(pgbouncer),
            auth: await auth(ctx, project.ref, authConfig),
            api: api(postgrest),
            realtime: realtime(realtimeConfig),
            storage: storage(storageConfig),
          },
        },
      };
    },
  );
  return routes.router;
}
