import express, { Router } from "express";
import { credentialsOf, DataAuthError, authenticateDataRequest } from "../auth/dataAuth";
import type { AppContext } from "../context";
import { projectOfRequest, ProjectUnavailable } from "../http/dataProject";
import { requestSettingsOf } from "../http/requestSettings";
import { executeGraphql } from "./endpoint";

/** `POST /graphql/v1`: pg_graphql's transport. Errors keep pg_graphql's shape and HTTP 200. */
export function graphqlRouter(ctx: AppContext): Router {
  const router = Router({ strict: true });
  // The body parser is scoped to this route: other routers read their bodies themselves.
  router.post("/graphql/v1", express.json({ limit: "5mb" }), async (req, res, next) => {
    try {
      const project = await projectOfRequest(ctx, req);
      const auth = await authenticateDataRequest(project, credentialsOf(req.headers));
      res.json(await executeGraphql(ctx, project, auth, req.body ?? {}, requestSettingsOf(req)));
    } catch (e) {
      if (e instanceof DataAuthError) res.status(e.status).json({ message: e.message, hint: e.hint });
      else if (e instanceof ProjectUnavailable) res.status(e.status).json({ message: e.message });
      else next(e);
    }
  });
  return router;
}
