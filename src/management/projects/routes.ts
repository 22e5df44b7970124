import { Router } from "express";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { route } from "../route";

/** Project lifecycle endpoints. */
export function projectRoutes(ctx: AppContext): Router {
  const router = Router();

  route(
    router,
    {
      method: "post",
      path: "/v1/projects/:ref/restart",
      summary: "Restarts a project: rebuilds its APIs, answering once the new schema serves",
      access: { permission: "project_admin_write", scope: "projects:write" },
      status: 200,
    },
    async ({ params }) => {
      const project = await ctx.registry.get(params.ref);
      if (!project) throw new HttpError(404, `Project ${params.ref} not found`);
      project.invalidateSchema("restart");
      return {};
    },
  );

  return router;
}
