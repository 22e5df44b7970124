import express, { Router } from "express";
import type { AppContext } from "../context";
import { identifyCaller, managementErrorHandler, requirePrincipal } from "./http";
import { resolveMembership } from "./membership";
import { openApiRoute } from "./openapi";
import { organizationRoutes } from "./organizations/routes";
import { memberRoutes } from "./organizations/members";
import { accountRoutes } from "./account/routes";
import { profileRoutes } from "./profile/routes";
import { projectRoutes } from "./projects/routes";
import { transferRoutes } from "./projects/transfers";
import { apiKeyRoutes } from "./api-keys/routes";
import { authConfigRoutes } from "./auth-config/routes";
import { signingKeyRoutes } from "./signing-keys/routes";
import { thirdPartyAuthRoutes } from "./third-party-auth/routes";
import { rateLimit } from "./rateLimit";
import { oauthClientRoutes, oauthRoutes } from "./oauth/routes";
// Remaining configuration families
import { advisorRoutes } from "./advisors/routes";
import { analyticsRoutes } from "./analytics/routes";
import { billingRoutes } from "./billing/routes";
import { branchRoutes } from "./branches/routes";
import { databaseConfigRoutes } from "./database-config/routes";
import { diskRoutes } from "./database-config/disk";
import { upgradeRoutes } from "./upgrade/routes";
import { backupRoutes } from "./backups/routes";
import { replicaRoutes } from "./replicas/routes";
import { domainRoutes } from "./domains/routes";
import { functionRoutes } from "./functions/routes";
import { networkRoutes } from "./network/routes";
import { poolerRoutes } from "./pooler/routes";
import { jitRoutes } from "./jit/routes";
import { realtimeRoutes } from "./realtime/routes";
import { snippetRoutes } from "./snippets/routes";
import { ssoRoutes } from "./sso/routes";
import { storageRoutes } from "./storage/routes";
// Project configuration families
import { databaseRoutes } from "./database/routes";
import { migrationRoutes } from "./database/migrations";
import { restapiRoutes } from "./restapi/routes";
import { secretRoutes } from "./secrets/routes";
import { typeRoutes } from "./types/routes";
import { projectConfigRoutes } from "./project-config/routes";

/**
 * The Management API at /v1 and /v2: the caller is identified, counted by the rate limiter (so 401 and 429
 * carry the rate-limit headers too), then refused without a valid token; then one router per resource family.
 */
export function managementRouter(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  router.use(["/v1", "/v2"], identifyCaller(ctx), rateLimit(ctx), express.json({ limit: "10mb" }));
  router.use(openApiRoute());
  // The OAuth client endpoints authenticate the application, not a bearer token; signing in and accepting an
  // invitation need none.
  router.use(oauthClientRoutes(ctx), accountRoutes(ctx));
  router.use(["/v1", "/v2"], requirePrincipal, resolveMembership(ctx));
  router.use(oauthRoutes(ctx));
  router.use(profileRoutes(ctx));
  router.use(organizationRoutes(ctx), memberRoutes(ctx));
  router.use(projectRoutes(ctx), transferRoutes(ctx));
  router.use(apiKeyRoutes(ctx), signingKeyRoutes(ctx), thirdPartyAuthRoutes(ctx), authConfigRoutes(ctx));
  // Project configuration families
  router.use(
    databaseRoutes(ctx),
    migrationRoutes(ctx),
    restapiRoutes(ctx),
    secretRoutes(ctx),
    typeRoutes(ctx),
    projectConfigRoutes(ctx),
  );
  // Remaining configuration families
  router.use(
    realtimeRoutes(ctx),
    storageRoutes(ctx),
    networkRoutes(ctx),
    poolerRoutes(ctx),
    jitRoutes(ctx),
    backupRoutes(ctx),
    replicaRoutes(ctx),
    databaseConfigRoutes(ctx),
    diskRoutes(ctx),
    upgradeRoutes(ctx),
    advisorRoutes(ctx),
    analyticsRoutes(ctx),
    billingRoutes(ctx),
    domainRoutes(ctx),
    snippetRoutes(ctx),
    branchRoutes(ctx),
    functionRoutes(ctx),
    ssoRoutes(ctx),
  );
  router.use(["/v1", "/v2"], (_req, res) => {
    res.status(404).json({ message: "Not found" });
  });
  router.use(managementErrorHandler(ctx));
  return router;
}
