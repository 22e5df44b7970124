import { z } from "zod";

/** Statuses a project moves through (the product's set; Strata uses those it can reach). */
export const PROJECT_STATUSES = [
  "INACTIVE",
  "ACTIVE_HEALTHY",
  "ACTIVE_UNHEALTHY",
  "COMING_UP",
  "UNKNOWN",
  "GOING_DOWN",
  "INIT_FAILED",
  "REMOVED",
  "RESTORING",
  "UPGRADING",
  "PAUSING",
  "RESTORE_FAILED",
  "RESTARTING",
  "PAUSE_FAILED",
  "RESIZING",
] as const;

export const createProjectBody = z.object({
  name: z.string().trim().min(1, "must not be empty").max(256),
  organization_slug: z.string().min(1, "must not be empty"),
  db_pass: z.string().min(1, "must not be empty"),
  // Deprecated or placement fields clients still send: accepted; the project goes to the cluster of `region`
  // when Strata knows one there, else to the default cluster.
  organization_id: z.string().optional(),
  template_url: z.string().optional(),
  plan: z.string().optional(),
  region: z.string().optional(),
  kps_enabled: z.boolean().optional(),
  region_selection: z.object({ type: z.string(), code: z.string() }).optional(),
  desired_instance_size: z.string().optional(),
  high_availability: z.boolean().optional(),
});

export const renameProjectBody = z.object({ name: z.string().trim().min(1, "must not be empty").max(256) });

export const organizationProjectsQuery = z.object({
  offset: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(100).default(100),
  search: z.string().optional(),
  sort: z.enum(["name_asc", "name_desc", "created_asc", "created_desc"]).default("name_asc"),
  statuses: z
    .string()
    .optional()
    .transform((s) =>
      s
        ? s
            .split(",")
            .map((x) => x.trim())
            .filter(Boolean)
        : undefined,
    )
    .pipe(z.array(z.enum(PROJECT_STATUSES)).optional()),
});

export const HEALTH_SERVICES = [
  "auth",
  "db",
  "db_postgres_user",
  "pooler",
  "realtime",
  "rest",
  "storage",
  "pg_bouncer",
  "graphql",
] as const;
export type HealthService = (typeof HEALTH_SERVICES)[number];

/** `services` arrives as repeated keys (`services=auth&services=rest`) or as a comma list. */
export const healthQuery = z.object({
  services: z
    .union([z.string(), z.array(z.string())])
    .transform((v) => (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(",")).filter(Boolean))
    .pipe(z.array(z.enum(HEALTH_SERVICES)).min(1)),
  timeout_ms: z.coerce.number().int().min(1).max(10_000).default(5_000),
});

export const availableRegionsQuery = z.object({
  organization_slug: z.string().min(1),
  continent: z.enum(["NA", "SA", "EU", "AF", "AS", "OC", "AN"]).optional(),
  desired_instance_size: z.string().optional(),
});

export const projectSummary = z.object({
  id: z.string(),
  ref: z.string(),
  organization_id: z.string(),
  organization_slug: z.string(),
  name: z.string(),
  region: z.string(),
  created_at: z.string(),
  status: z.enum(PROJECT_STATUSES),
});

export const projectDetail = projectSummary.extend({
  database: z.object({
    host: z.string(),
    version: z.string(),
    sql_engine: z.string(),
    /** The product's name for `sql_engine`, for clients that read it. */
    postgres_engine: z.string(),
    release_channel: z.string(),
  }),
});

export const projectRefResponse = z.object({ id: z.number().int(), ref: z.string(), name: z.string() });

export const organizationProjectItem = z.object({
  ref: z.string(),
  name: z.string(),
  cloud_provider: z.string(),
  region: z.string(),
  is_branch: z.boolean(),
  status: z.enum(PROJECT_STATUSES),
  inserted_at: z.string(),
  databases: z.array(
    z.object({
      region: z.string(),
      status: z.enum(PROJECT_STATUSES),
      cloud_provider: z.string(),
      identifier: z.string(),
      type: z.literal("PRIMARY"),
    }),
  ),
});

export const organizationProjectsResponse = z.object({
  projects: z.array(organizationProjectItem),
  pagination: z.object({ count: z.number().int(), limit: z.number().int(), offset: z.number().int() }),
});

export const healthItem = z.object({
  name: z.enum(HEALTH_SERVICES),
  healthy: z.boolean(),
  status: z.enum(["COMING_UP", "ACTIVE_HEALTHY", "UNHEALTHY"]),
  info: z.object({ name: z.string(), version: z.string(), description: z.string() }).optional(),
  error: z.string().optional(),
});

const regionGroup = z.object({ name: z.string(), code: z.string(), type: z.string() });
const regionSpecific = regionGroup.extend({ provider: z.string(), status: z.string() });
export const availableRegionsResponse = z.object({
  recommendations: z.object({ smartGroup: regionGroup, specific: z.array(regionSpecific) }),
  all: z.object({ smartGroup: z.array(regionGroup), specific: z.array(regionSpecific) }),
});

export const restoreVersionsResponse = z.object({
  available_versions: z.array(
    z.object({
      version: z.string(),
      release_channel: z.string(),
      sql_engine: z.string(),
      postgres_engine: z.string(),
    }),
  ),
});

export const emptyObject = z.object({});
