import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { routeTable } from "../route";
import { readSettings, writeSettings } from "../settings";
import { HttpError } from "../http";
import { diskUsage, DISK_DEFAULTS, setManualReadOnly, settleReadOnly, temporarilyDisable } from "./readonly";
import { applyConfig, effectiveConfig, PostgresConfigAnswer, PostgresConfigBody } from "./postgres";
import { AutoscaleAnswer, AutoscaleBody, readAutoscale, writeAutoscale } from "./autoscale";

/**
 * Database configuration: PostgreSQL settings applied for real (per database, or, for the installation's
 * administrators, ALTER SYSTEM or a restart of the embedded cluster), read-only mode (manual and past the
 * disk threshold), disk figures measured from the database and the volume, database context. Pooler, SSL
 * and JIT have their own families.
 */
export function databaseConfigRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  const base = "/v1/projects/:ref";

  routes.get(
    `${base}/config/database/postgres`,
    "Gets the effective PostgreSQL settings a new session of the project's database starts with",
    {
      access: { permission: "database_config_read", scope: "database:read" },
      status: 200,
      response: PostgresConfigAnswer,
    },
    async ({ project }) => effectiveConfig(project),
  );
  routes.put(
    `${base}/config/database/postgres`,
    "Applies PostgreSQL settings, validated against the server's limits: per database where PostgreSQL " +
      "allows it, else cluster-wide (ALTER SYSTEM and a reload, or a restart of the embedded cluster when " +
      "restart_database is true; cluster-wide settings and restarts are for the installation's " +
      "administrators only: 403 naming them for others); a setting that cannot be applied answers 400 " +
      "with the reason",
    {
      access: { permission: "database_config_write", scope: "database:write" },
      body: PostgresConfigBody,
      status: 200,
      response: PostgresConfigAnswer,
    },
    async ({ req, project, body }) => {
      await applyConfig(ctx, project, body, req.principal!.installationAdmin);
      return effectiveConfig(project);
    },
  );

  const ReadOnlyAnswer = z.object({
    enabled: z.boolean(),
    override_enabled: z.boolean(),
    override_active_until: z.string(),
  });
  routes.get(
    `${base}/readonly`,
    "Gets read-only mode: on when set by PUT or when the database passes 95 % of its disk, unless lifted " +
      "by temporary-disable until override_active_until",
    {
      access: { permission: "database_readonly_config_read", scope: "database:read" },
      status: 200,
      response: ReadOnlyAnswer,
    },
    async ({ project }) => settleReadOnly(ctx, project),
  );
  routes.put(
    `${base}/readonly`,
    "Turns read-only mode on or off by hand (Strata's own endpoint); the disk threshold still turns it on",
    {
      access: { permission: "database_readonly_config_write", scope: "database:write" },
      body: z.object({ enabled: z.boolean() }).strict(),
      status: 200,
      response: ReadOnlyAnswer,
    },
    async ({ project, body }) => setManualReadOnly(ctx, project, body.enabled),
  );
  routes.post(
    `${base}/readonly/temporary-disable`,
    "Lifts read-only mode for 15 minutes; it comes back afterwards if its cause remains",
    {
      access: { permission: "database_readonly_config_write", scope: "database:write" },
      status: 201,
      response: z.object({}),
    },
    async ({ project }) => {
      await temporarilyDisable(ctx, project);
      return {};
    },
  );

  const disk = { permission: "infra_disk_config_read" };
  const DiskAttributes = z
    .object({
      size_gb: z.number().int().min(1).max(65_536),
      type: z.enum(["gp3", "io2"]),
      iops: z.number().int().min(3000).max(256_000).optional(),
      throughput_mibps: z.number().int().min(125).max(1000).optional(),
    })
    .strict();
  routes.get(
    `${base}/config/disk`,
    "Gets the disk config (size_gb is the size read-only mode's threshold is computed from)",
    {
      project: "any",
      access: disk,
      status: 200,
      response: z.object({
        attributes: z.object({
          iops: z.number(),
          size_gb: z.number(),
          throughput_mibps: z.number(),
          type: z.string(),
        }),
        last_modified_at: z.string(),
      }),
    },
    async ({ project }) => {
      const d = await readSettings(ctx, project.ref, "disk", DISK_DEFAULTS);
      const { rows } = await ctx.platformPool.query(
        "select created_at from platform.projects where ref = $1",
        [project.ref],
      );
      return { ...d, last_modified_at: d.last_modified_at || new Date(rows[0].created_at).toISOString() };
    },
  );
  routes.post(
    `${base}/config/disk`,
    "Sets the disk config; size_gb may only grow, and read-only mode's threshold (95 %) follows it at the next check",
    {
      project: "any",
      access: { permission: "infra_disk_config_write" },
      body: z.object({ attributes: DiskAttributes }).strict(),
      status: 201,
      response: z.object({}),
    },
    async ({ project, body }) => {
      const current = await readSettings(ctx, project.ref, "disk", DISK_DEFAULTS);
      if (body.attributes.size_gb < current.attributes.size_gb) {
        throw new HttpError(400, `size_gb can only grow (now ${current.attributes.size_gb})`);
      }
      await writeSettings(ctx, project.ref, "disk", DISK_DEFAULTS, {
        attributes: { ...current.attributes, ...body.attributes },
        last_modified_at: new Date().toISOString(),
      });
      return {};
    },
  );
  routes.get(
    `${base}/config/disk/util`,
    "Measures the project's disk: fs_used_bytes is the database's size, fs_size_bytes its disk (the disk " +
      "config, the installation's quota or the volume, whichever is smallest), fs_avail_bytes what is left",
    {
      access: disk,
      status: 200,
      response: z.object({
        timestamp: z.string(),
        metrics: z.object({
          fs_size_bytes: z.number(),
          fs_avail_bytes: z.number(),
          fs_used_bytes: z.number(),
        }),
      }),
    },
    async ({ project }) => {
      const usage = await diskUsage(ctx, project);
      return {
        timestamp: new Date().toISOString(),
        metrics: {
          fs_size_bytes: usage.sizeBytes,
          fs_avail_bytes: usage.availBytes,
          fs_used_bytes: usage.usedBytes,
        },
      };
    },
  );
  routes.get(
    `${base}/config/disk/autoscale`,
    "Gets disk autoscaling: growth_percent, min_increment_gb, max_size_gb, and whether it is on (enabled, Strata's own; off by default)",
    { project: "any", access: disk, status: 200, response: AutoscaleAnswer },
    async ({ project }) => readAutoscale(ctx, project.ref),
  );
  routes.put(
    `${base}/config/disk/autoscale`,
    "Sets disk autoscaling (Strata's own endpoint): with enabled, once the database uses 90 % of its disk " +
      "the disk grows by growth_percent, at least min_increment_gb, up to max_size_gb (and the volume), " +
      "instead of the project going read-only at 95 %; a grown disk may pass PROJECT_DISK_QUOTA_MB",
    {
      project: "any",
      access: { permission: "infra_disk_config_write" },
      body: AutoscaleBody,
      status: 200,
      response: AutoscaleAnswer,
    },
    async ({ project, body }) => {
      const disk = await readSettings(ctx, project.ref, "disk", DISK_DEFAULTS);
      return writeAutoscale(ctx, project.ref, body, disk.attributes.size_gb);
    },
  );

  routes.get(
    `${base}/database/context`,
    "Lists the project's databases and their schemas",
    {
      rateLimits: [
        { name: "context-minute", points: 10, seconds: 60 },
        { name: "context-second", points: 1, seconds: 1 },
      ],
      access: { permission: "database_read", scope: "projects:read" },
      status: 200,
    },
    async ({ project }) => {
      const { rows } = await project.adminPool.query(
        `select current_database() as name,
                (select coalesce(json_agg(json_build_object('name', nspname) order by nspname), '[]') from pg_namespace
                  where nspname !~ '^pg_' and nspname <> 'information_schema') as schemas`,
      );
      return { databases: rows };
    },
  );

  routes.post(
    `${base}/database/webhooks/enable`,
    "Enables database webhooks",
    { access: { permission: "database_webhooks_config_write", scope: "database:write" }, status: 201 },
    async ({ project }) => {
      // supabase_functions.http_request() and its queue; Strata's dispatcher sends what the triggers queue.
      await project.adminPool.query("select _strata.enable_webhooks()");
      await writeSettings(ctx, project.ref, "webhooks", { enabled: false }, { enabled: true });
      ctx.webhooks?.refresh();
      return {};
    },
  );

  return routes.router;
}
