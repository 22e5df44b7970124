import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { routeTable } from "../route";
import { writeSettings } from "../../projects/settings";
import { setManualReadOnly, settleReadOnly, temporarilyDisable } from "./readonly";
import { applyConfig, effectiveConfig, PostgresConfigAnswer, PostgresConfigBody } from "./postgres";
import { databaseContext, enableWebhooks } from "./store";

/**
 * Database configuration: PostgreSQL settings applied for real (per database, or, for the installation's
 * administrators, ALTER SYSTEM or a restart of the embedded cluster), read-only mode (manual and past the
 * disk threshold), database context, database webhooks. The disk (disk.ts), pooler, SSL and JIT have their
 * own families.
 */
export const POSTGRES_CONFIG_READ = { permission: "database_config_read", scope: "database:read" };

export function databaseConfigRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  const base = "/v1/projects/:ref";

  routes.get(
    `${base}/config/database/postgres`,
    "Gets the effective PostgreSQL settings a new session of the project's database starts with",
    {
      access: POSTGRES_CONFIG_READ,
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
      "with the reason. The body replaces the overrides: a field left out goes back to the server's default",
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
    async ({ project }) => ({ databases: await databaseContext(project.adminPool) }),
  );

  routes.post(
    `${base}/database/webhooks/enable`,
    "Enables database webhooks",
    { access: { permission: "database_webhooks_config_write", scope: "database:write" }, status: 201 },
    async ({ project }) => {
      await enableWebhooks(project.adminPool);
      await writeSettings(ctx, project.ref, "webhooks", { enabled: false }, { enabled: true });
      ctx.webhooks?.refresh();
      return {};
    },
  );

  return routes.router;
}
