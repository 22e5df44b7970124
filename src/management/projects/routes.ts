import { Router } from "express";
import type { AppContext } from "../../context";
import { endpoint, HttpError } from "../http";

/** Project lifecycle endpoints. */
export function projectRoutes(ctx: AppContext): Router {
  const router = Router();

  // Rebuilds the project's APIs and answers once the new schema serves.
  router.post(
    "/v1/projects/:ref/restart",
    endpoint({ permission: "project_admin_write", scope: "projects:write" }, async (req, res) => {
      const project = await ctx.registry.get(String(req.params.ref));
      if (!project) throw new HttpError(404, `Project ${req.params.ref} not found`);
      project.invalidateSchema("restart");
      res.status(200).json({});
    }),
  );

  return router;
}
