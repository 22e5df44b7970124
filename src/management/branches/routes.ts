import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { route } from "../route";

/** Branches and action runs. Every project has its production branch; preview branches are not built yet. */
export function branchRoutes(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  const read = {
    permission: { or: ["branching_production_read", "branching_development_read"] },
    scope: "environment:read",
  };
  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path: "/v1/projects/:ref/branches",
      summary: "Lists the project's branches",
      access: read,
      status: 200,
    },
    async ({ project }) => {
      const { rows } = await ctx.platformPool.query(
        "select id, created_at, updated_at from platform.projects where ref = $1",
        [project.ref],
      );
      return [
        {
          id: `00000000-0000-0000-0000-${String(rows[0].id).padStart(12, "0")}`,
          name: "main",
          project_ref: project.ref,
          parent_project_ref: project.ref,
          is_default: true,
          persistent: true,
          status: "FUNCTIONS_DEPLOYED",
          created_at: new Date(rows[0].created_at).toISOString(),
          updated_at: new Date(rows[0].updated_at).toISOString(),
          with_data: true,
        },
      ];
    },
  );
  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path: "/v1/projects/:ref/actions",
      summary: "Lists action runs",
      access: { permission: "action_runs_read", scope: "environment:read" },
      query: z.object({
        offset: z.coerce.number().int().min(0).optional(),
        limit: z.coerce.number().int().min(1).max(100).optional(),
      }),
      status: 200,
    },
    async () => {
      return [];
    },
  );
  return router;
}
