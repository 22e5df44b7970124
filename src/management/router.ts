import express, { Router } from "express";
import type { AppContext } from "../context";
import { identifyCaller, managementErrorHandler, requirePrincipal } from "./http";
import { resolveMembership } from "./membership";
import { openApiRoute } from "./openapi";
import { organizationRoutes } from "./organizations/routes";
import { profileRoutes } from "./profile/routes";
import { projectRoutes } from "./projects/routes";
import { rateLimit } from "./rateLimit";
// Project configuration families
import { databaseRoutes } from "./database/routes";
import { migrationRoutes } from "./database/migrations";
import { restapiRoutes } from "./restapi/routes";
import { secretRoutes } from "./secrets/routes";
import { typeRoutes } from "./types/routes";

/**
 * The Management API at /v1 and /v2: the caller is identified, counted by the rate limiter (so 401 and 429
 * carry the rate-limit headers too), then refused without a valid token; then one router per resource family.
 */
export function managementRouter(ctx: AppContext): Router {
  const router = Router();
  router.use(["/v1", "/v2"], identifyCaller(ctx), rateLimit(ctx), express.json({ limit: "10mb" }));
  router.use(openApiRoute());
  router.use(["/v1", "/v2"], requirePrincipal, resolveMembership(ctx));
  router.use(profileRoutes(ctx));
  router.use(organizationRoutes(ctx));
  router.use(projectRoutes(ctx));
  // Project configuration families
  router.use(
    databaseRoutes(ctx),
    migrationRoutes(ctx),
    restapiRoutes(ctx),
    secretRoutes(ctx),
    typeRoutes(ctx),
  );
  router.use(["/v1", "/v2"], (_req, res) => {
    res.status(404).json({ message: "Not found" });
  });
  router.use(managementErrorHandler(ctx));
  return router;
}
