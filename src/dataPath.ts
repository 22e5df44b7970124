import type { IncomingMessage, ServerResponse } from "node:http";
import type { Express, NextFunction, Request, Response } from "express";
import type { AppContext } from "./context";
import { handleFunctions } from "./functions/router";
import { graphqlBody, handleGraphql } from "./graphql/router";
import { handleRest, restBody } from "./rest/router";

/**
 * The data path: `POST /graphql/v1`, `/rest/v1/...`, `/storage/v1/...` and edge-function invocations
 * (`/functions/v1/...`) served on node:http ahead of Express. Express' router walks every middleware and
 * router layer of the app per request, and pino-http builds a child logger per request; here the request goes
 * straight through the same pieces the Express routes use, in the same order: CORS, the route's body parser,
 * its handler, and the error handler that answers what they pass on (functions have neither CORS nor a body
 * parser: they answer their own preflights, and their bodies are streamed; storage's router is the one the
 * Express app mounts, with its own route table, body parsers and error handler). Express' request and
 * response prototypes are kept, so the handlers see exactly what they see there.
 */

type Handler = (req: Request, res: Response, next: NextFunction) => void;

export interface DataPathParts {
  app: Express;
  /** The data APIs' CORS middleware (it also answers preflights). */
  cors: Handler;
  /** The /storage/v1 router the Express app mounts (routes, their parsers and storage's error handler). */
  storage: Handler;
  /** Metrics and usage of a request, by the path it came with. */
  observe(req: IncomingMessage, path: string): void;
  /** Answers an error a body parser or handler passed on, as the Express app does. */
  fail(err: unknown, req: Request, res: Response, next: NextFunction): void;
}

const REST = "/rest/v1";
const FUNCTIONS = "/functions/v1";
const STORAGE = "/storage/v1";

/** Whether `path` is `prefix` or below it, as Express mounts a router at `prefix`. */
const under = (path: string, prefix: string) =>
  path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === "/");

/** Returns a listener that serves a data request and answers true, or answers false for any other request. */
export function dataPath(
  ctx: AppContext,
  parts: DataPathParts,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const graphql: Handler[] = [
    parts.cors,
    graphqlBody,
    (req, res, next) => void handleGraphql(ctx, req, res, next),
  ];
  const rest: Handler[] = [parts.cors, restBody, (req, res) => void handleRest(ctx, req, res)];
  const functions: Handler[] = [(req, res) => void handleFunctions(ctx, req, res)];
  const storage: Handler[] = [parts.cors, parts.storage];
  const { app } = parts;

  // The request line holds method, path (never the query), status and time, nothing to redact: searching it
  // for the logger's redacted paths took more than half of its cost.
  const lineLog = ctx.log.child({}, { redact: [] });
  /**
   * The request line, as pino-http writes it for the Express routes: method and path, never the query. At
   * `debug` only: every data request is already recorded as an edge-log event (`platform.log_events`, read
   * through the Management API's logs endpoint, as on the platform), and a line per request on stdout as well
   * cost about a twentieth of a request's CPU.
   */
  const logRequest = (req: IncomingMessage, res: ServerResponse, path: string, started: bigint) => {
    res.once("close", () => {
      const responseTime = Math.round(Number(process.hrtime.bigint() - started) / 1e6);
      lineLog.debug(
        { req: { method: req.method, path }, res: { status: res.statusCode }, responseTime },
        "request",
      );
    });
  };

  return (incoming, outgoing) => {
    const url = incoming.url ?? "";
    const q = url.indexOf("?");
    const path = q === -1 ? url : url.slice(0, q);
    let chain: Handler[];
    let mount: string | undefined;
    if (path === "/graphql/v1") {
      // Other methods are Express' (CORS, then its 404).
      if (incoming.method !== "POST" && incoming.method !== "OPTIONS") return false;
      chain = graphql;
    } else if (under(path, REST)) {
      chain = rest;
      mount = REST;
    } else if (under(path, FUNCTIONS)) {
      chain = functions;
      mount = FUNCTIONS;
    } else if (under(path, STORAGE)) {
      chain = storage;
      mount = STORAGE;
    } else {
      return false;
    }
    if (ctx.log.isLevelEnabled("debug")) logRequest(incoming, outgoing, path, process.hrtime.bigint());
    // What Express' app.handle does before routing.
    const req = incoming as Request;
    const res = outgoing as Response;
    req.res = res;
    res.req = req;
    // The server's own classes already have Express' prototypes (server.ts); others get them here.
    if (!Object.prototype.isPrototypeOf.call(app.request, req)) Object.setPrototypeOf(req, app.request);
    if (!Object.prototype.isPrototypeOf.call(app.response, res)) Object.setPrototypeOf(res, app.response);
    res.locals = Object.create(null);
    req.originalUrl = url;
    req.params = {};
    parts.observe(req, path);
    if (mount) {
      // What mounting a router at its prefix does: handlers see the path below it.
      req.baseUrl = mount;
      const below = url.slice(mount.length);
      req.url = below.startsWith("/") ? below : "/" + below;
    }
    let step = 0;
    const next: NextFunction = (err?: unknown) => {
      if (err) return parts.fail(err, req, res, finalError(ctx, res));
      try {
        chain[step++](req, res, next);
      } catch (e) {
        parts.fail(e, req, res, finalError(ctx, res));
      }
    };
    next();
    return true;
  };
}

/** What the Express app's last error handler does with an error the route's handler passes on. */
function finalError(ctx: AppContext, res: Response): NextFunction {
  return (err?: unknown) => {
    ctx.log.error({ err }, "request failed");
    if (res.headersSent) res.destroy();
    else res.status(500).json({ message: "Internal server error" });
  };
}
