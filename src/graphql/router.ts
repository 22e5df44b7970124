import express, {
  Router,
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
} from "express";
import type { AppContext } from "../context";
import { asPoolTimeout, isDatabaseUnreachable, PoolTimeout } from "../db/errors";
import { GateError, openDataRequest } from "../http/gate";
import { jsonBody } from "../http/plainBody";
import { sendText } from "../http/sendText";
import { requestSettingsOf } from "../http/requestSettings";
import { roleSettingsOf } from "../catalog/roleSettings";
import { executeGraphql, graphqlResponseText } from "./endpoint";

/**
 * The request body: JSON objects up to 5 MB, express.json's answers (the same parser on the Express route and
 * the data path); the common body is read without body-parser's per-request machinery (plainBody).
 */
const GRAPHQL_BODY_LIMIT = 5 * 1024 * 1024;
export const graphqlBody: RequestHandler = jsonBody(
  express.json({ limit: GRAPHQL_BODY_LIMIT }),
  GRAPHQL_BODY_LIMIT,
);

/**
 * `POST /graphql/v1`: pg_graphql's transport. Errors keep pg_graphql's shape and HTTP 200, except when the
 * database is out of reach or has no connection free: 503, still `{"errors": [{"message"}]}`.
 */
export async function handleGraphql(
  ctx: AppContext,
  req: Request,
  res: Response,
  next: NextFunction,
): Promise<void> {
  try {
    const { project, auth } = await openDataRequest(ctx, req);
    const settings = { ...(await roleSettingsOf(project, auth.role)), ...requestSettingsOf(req) };
    const response = await executeGraphql(ctx, project, auth, req.body ?? {}, settings);
    sendText(res, 200, "application/json", graphqlResponseText(response));
  } catch (caught) {
    // The schema's introspection also takes a connection: its pool timeout is the same 503.
    const e = asPoolTimeout(caught);
    // A refusal of the gate answers as the platform's gateway does: its status, `{message, hint}`.
    if (e instanceof GateError) res.status(e.status).json({ message: e.message, hint: e.hint });
    else if (e instanceof PoolTimeout) res.status(503).json({ errors: [{ message: e.message }] });
    else if (isDatabaseUnreachable(e)) {
      res.status(503).json({ errors: [{ message: "Database client error. Retrying the connection." }] });
    } else next(e);
  }
}

/** The Express route (the data path in dataPath.ts serves the same handler ahead of Express). */
export function graphqlRouter(ctx: AppContext): Router {
  const router = Router({ strict: true, caseSensitive: true });
  // The body parser is scoped to this route: other routers read their bodies themselves.
  router.post("/graphql/v1", graphqlBody, (req, res, next) => handleGraphql(ctx, req, res, next));
  return router;
}
