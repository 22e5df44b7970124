import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { findAnyProject, type ProjectRow } from "../projects/store";
import { routeTable } from "../route";
import { beginUpgrade, eligibility, upgradeStatus } from "./service";

const Eligibility = z.object({
  eligible: z.boolean(),
  current_app_version: z.string(),
  latest_app_version: z.string(),
  current_app_version_release_channel: z.string(),
  target_upgrade_versions: z.array(
    z.object({ sql_version: z.string(), release_channel: z.string(), app_version: z.string() }),
  ),
  duration_estimate_hours: z.number().int(),
  legacy_auth_custom_roles: z.array(z.string()),
  objects_to_be_dropped: z.array(z.string()),
  unsupported_extensions: z.array(z.string()),
  user_defined_objects_in_internal_schemas: z.array(z.string()),
  validation_errors: z.array(z.object({ type: z.string(), dependents: z.array(z.string()) })),
  warnings: z.array(z.object({ type: z.string() })),
});

const Status = z.object({
  databaseUpgradeStatus: z
    .object({
      initiated_at: z.string(),
      latest_status_at: z.string(),
      target_version: z.number().int(),
      error: z.string().optional(),
      error_message: z.string().optional().describe("Strata's own: what failed, in words"),
      progress: z.string(),
      status: z.number().int().describe("0 upgrading, 1 upgraded, 2 failed"),
    })
    .nullable(),
});

/** Major-version upgrades of a project's database (service.ts). */
export function upgradeRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/upgrade";
  const row = async (ref: string): Promise<ProjectRow> => {
    const project = await findAnyProject(ctx.platformPool, ref);
    if (!project) throw new HttpError(404, `Project ${ref} not found`);
    return project;
  };
  const read = { permission: { and: ["project_admin_read", "database_read"] }, scope: "projects:read" };

  routes.get(
    `${base}/eligibility`,
    "Tells whether the project's database can move to a newer PostgreSQL major: from the version its " +
      "cluster runs and the newer binaries installed (projects on Strata's embedded cluster only)",
    { access: read, status: 200, response: Eligibility },
    async ({ project }) => eligibility(ctx, await row(project.ref)),
  );
  routes.post(
    base,
    "Moves the project's database to an embedded cluster of the newer major (dump and restore; data, " +
      "roles and their passwords, keys and settings kept); follow it with upgrade/status",
    {
      access: {
        permission: { and: ["project_admin_write", "database_write"] },
        scope: "projects:write",
      },
      body: z.object({
        target_version: z.string().min(1),
        release_channel: z.enum(["internal", "alpha", "beta", "ga", "withdrawn", "preview"]).optional(),
      }),
      status: 201,
      response: z.object({ tracking_id: z.string() }),
    },
    async ({ project, body }) => {
      if (body.release_channel !== undefined && body.release_channel !== "ga")
        throw new HttpError(400, `release_channel ${body.release_channel} has no versions here (only ga)`);
      return { tracking_id: await beginUpgrade(ctx, await row(project.ref), body.target_version) };
    },
  );
  routes.get(
    `${base}/status`,
    "The project's latest upgrade (or the one of tracking_id): progress through the platform's steps, " +
      "status 0 upgrading, 1 upgraded, 2 failed (the project then stays on its old cluster)",
    { access: read, query: z.object({ tracking_id: z.uuid().optional() }), status: 200, response: Status },
    async ({ project, query }) => upgradeStatus(ctx, project.ref, query.tracking_id),
  );
  return routes.router;
}
