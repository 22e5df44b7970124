import express, { Router } from "express";
import type { AppContext } from "../context";
import { authenticateToken, managementErrorHandler } from "./http";
import { projectRoutes } from "./projects/routes";
import { apiKeyRoutes } from "./api-keys/routes";
import { authConfigRoutes } from "./auth-config/routes";
import { signingKeyRoutes } from "./signing-keys/routes";
import { thirdPartyAuthRoutes } from "./third-party-auth/routes";

/** The Management API at /v1 and /v2: token authentication, then one router per resource family. */
export function managementRouter(ctx: AppContext): Router {
  const router = Router();
  router.use(["/v1", "/v2"], express.json({ limit: "10mb" }), authenticateToken(ctx));
  router.use(projectRoutes(ctx));
  router.use(apiKeyRoutes(ctx), signingKeyRoutes(ctx), thirdPartyAuthRoutes(ctx), authConfigRoutes(ctx));
  router.use(["/v1", "/v2"], (_req, res) => {
    res.status(404).json({ message: "Not found" });
  });
  router.use(managementErrorHandler(ctx));
  return router;
}
