import express, { Router } from "express";
import type { AppContext } from "../context";
import { authenticateToken, managementErrorHandler } from "./http";
import { projectRoutes } from "./projects/routes";
// Project configuration families
import { databaseRoutes } from "./database/routes";
import { migrationRoutes } from "./database/migrations";
import { restapiRoutes } from "./restapi/routes";
import { secretRoutes } from "./secrets/routes";
import { typeRoutes } from "./types/routes";

/** The Management API at /v1 and /v2: token authentication, then one router per resource family. */
export function managementRouter(ctx: AppContext): Router {
  const router = Router();
  router.use(["/v1", "/v2"], express.json({ limit: "10mb" }), authenticateToken(ctx));
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
