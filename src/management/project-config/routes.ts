import { createHmac } from "node:crypto";
import type { Request, Router } from "express";
import type { AppContext } from "../../context";
import { authSettings } from "../../auth/authConfig";
import { isSecretAuthField } from "../../platform/kek";
import { clusterVersion } from "../../projects/clusters";
import { AUTH_CONFIG_READ, authConfig } from "../auth-config/routes";
import { effectiveConfig } from "../database-config/postgres";
import { POSTGRES_CONFIG_READ } from "../database-config/routes";
import { checkAccess, found, HttpError, type Access } from "../http";
import { ACCESS as NETWORK_ACCESS, networkRestrictions, sslEnforcement } from "../network/routes";
import { POOL_SETTINGS_READ, poolSettings } from "../pooler/routes";
import { ADMIN_READ as PROJECT_READ } from "../projects/routes";
import { findProject } from "../projects/store";
import { REALTIME_CONFIG_READ, realtimeConfig } from "../realtime/routes";
import { REST_CONFIG_READ, restConfig } from "../restapi/routes";
import { routeTable } from "../route";
import { STORAGE_CONFIG_READ, storageConfig } from "../storage/routes";

/**
 * GET /v2/projects/{ref}/config: the project's database, pooler, auth, Data API, realtime and storage config in
 * one document, as the CLI's `config pull`, `config diff` and `config push` read it. Each section is what the
 * family's own v1 GET answers, read in process by that family's read function once the caller passes that
 * route's access rule (a caller it refuses is refused here, naming it), in the v2 names; auth secrets are
 * HMAC-SHA256 of their value keyed by the project ref, as the CLI hashes its local ones to compare. Values
 * Strata has no setting for are reported as what it does (no CDN cache to purge; PostgREST's and PgBouncer's
 * defaults).
 */

type Json = Record<string, any>;

/** The v1 GET a section is read as: its path under the project and its access rule. */
interface Section {
  path: string;
  access: Access;
}

/** Every section but the project's own detail, whose access rule is this route's. */
const SECTIONS: Section[] = [
  { path: "/ssl-enforcement", access: NETWORK_ACCESS.sslRead },
  { path: "/network-restrictions", access: NETWORK_ACCESS.restrictionsRead },
  { path: "/config/database/postgres", access: POSTGRES_CONFIG_READ },
  { path: "/config/database/pgbouncer", access: POOL_SETTINGS_READ },
  { path: "/config/auth", access: AUTH_CONFIG_READ },
  { path: "/postgrest", access: REST_CONFIG_READ },
  { path: "/config/realtime", access: REALTIME_CONFIG_READ },
  { path: "/config/storage", access: STORAGE_CONFIG_READ },
];

/** Refuses a caller the v1 GET of a section refuses, as it does, naming that GET. */
function checkSectionAccess(req: Request, ref: string, section: Section): void {
  try {
    checkAccess(req.principal!, section.access, req.membership);
  } catch (e) {
    if (!(e instanceof HttpError)) throw e;
    throw new HttpError(e.status, `/v1/projects/${ref}${section.path}: ${e.message}`);
  }
}

/** The major version of the project's PostgreSQL, as GET /v1/projects/{ref} reads its version. */
async function majorVersion(ctx: AppContext, userId: string, ref: string): Promise<number> {
  const row = found(await findProject(ctx.platformPool, userId, ref), "Project", ref);
  return Number((await clusterVersion(row.cluster)).split(".")[0]) || 0;
}

const cidrs = (v4: string[] = [], v6: string[] = []) => [
  ...v4.map((address) => ({ address, type: "v4" })),
  ...v6.map((address) => ({ address, type: "v6" })),
];

function database(majorVersion: number, ssl: Json, network: Json, postgres: Json) {
  const { "cron.log_statement": cronLogStatement, ...settings } = postgres;
  return {
    major_version: majorVersion,
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
async function auth(ctx: AppContext, ref: string): Promise<Json> {
  const [config, opened] = await Promise.all([authConfig(ctx, ref), authSettings(ctx.platformPool, ref)]);
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
    { access: PROJECT_READ, status: 200 },
    async ({ req, project }) => {
      for (const section of SECTIONS) checkSectionAccess(req, project.ref, section);
      const [version, ssl, network, postgres, pgbouncer, authSection, rest, realtimeSection, storageSection] =
        await Promise.all([
          majorVersion(ctx, req.principal!.userId, project.ref),
          sslEnforcement(ctx, project),
          networkRestrictions(ctx, project),
          effectiveConfig(project),
          poolSettings(ctx, project),
          auth(ctx, project.ref),
          restConfig(ctx.platformPool, project.ref),
          realtimeConfig(ctx, project.ref),
          storageConfig(ctx, project.ref),
        ]);
      return {
        data: {
          type: "project_config",
          id: project.ref,
          attributes: {
            database: database(version, ssl, network, postgres),
            pooler: pooler(pgbouncer),
            auth: authSection,
            api: api(rest),
            realtime: realtime(realtimeSection),
            storage: storage(storageSection),
          },
        },
      };
    },
  );
  return routes.router;
}
