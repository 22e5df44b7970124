import {
  IncomingMessage,
  ServerResponse,
  type RequestListener,
  type Server,
  type ServerOptions,
} from "node:http";
import express, { type Express, type NextFunction, type Request, type Response } from "express";
import { pinoHttp } from "pino-http";
import type { AppContext } from "./context";
import { authRouter } from "./auth/routes";
import { functionsRouter } from "./functions/router";
import { setPublicApi } from "./functions/runtime";
import { graphqlRouter } from "./graphql/router";
import { dataPath } from "./dataPath";
import { dataCors } from "./http/dataCors";
import { refOfHost } from "./http/gate";
import { interfaceOf, Metrics } from "./http/metrics";
import { managementErrorHandler } from "./management/http";
import { managementRouter } from "./management/router";
import { restRouter } from "./rest/router";
import { realtimeRouter } from "./realtime/routes";
import { storageRouter } from "./storage/routes";
import { studioRouter } from "./studio/server/routes";

/** Answers whether the main database is reachable (within two seconds). */
async function databaseReachable(ctx: AppContext): Promise<boolean> {
  const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2000).unref());
  const probe = ctx.platformPool.query("select 1").then(
    () => true,
    () => false,
  );
  return Promise.race([probe, timeout]);
}

/**
 * Records a request's interface, status and time in the metrics, and data requests in the usage counts and
 * the project's edge logs.
 */
function observer(ctx: AppContext, metrics: Metrics) {
  return (req: IncomingMessage & { res?: ServerResponse }, path: string): void => {
    const started = performance.now();
    // Routers rewrite req.url on the way: keep the one the request came with.
    const url = req.url ?? path;
    req.res?.on("finish", () => {
      const seconds = (performance.now() - started) / 1000;
      const iface = interfaceOf(path);
      const status = req.res!.statusCode;
      metrics.observe(iface, status, seconds);
      if (iface === "management" || iface === "other") return;
      const ref = refOfHost(ctx, req.headers.host) ?? ctx.registry.defaultRef;
      ctx.logs?.edge({
        ref,
        method: req.method ?? "GET",
        path: url,
        status,
        service: iface,
        durationMs: seconds * 1000,
      });
      // GraphQL counts as REST traffic, as the platform's usage report does.
      const service = iface === "graphql" ? "rest" : iface;
      if (service === "rest" || service === "auth" || service === "storage" || service === "realtime")
        ctx.usage?.record(ref, service);
    });
  };
}

/**
 * The server's request and response classes, made with Express' prototypes: the data path then serves them
 * as they are, where setting a prototype on every request costs each one its optimised object shape.
 */
function expressMessages(app: Express): ServerOptions {
  class ExpressRequest extends IncomingMessage {}
  class ExpressResponse extends ServerResponse {}
  Object.setPrototypeOf(ExpressRequest.prototype, app.request);
  Object.setPrototypeOf(ExpressResponse.prototype, app.response);
  return { IncomingMessage: ExpressRequest, ServerResponse: ExpressResponse as typeof ServerResponse };
}

/**
 * The one HTTP server's request listener: GraphQL, REST, storage and functions go through the data path
 * (node:http, the same handlers without the Express app's middleware walk), everything else through the
 * Express app (Management API, auth, realtime, health and metrics).
 */
export function createApp(ctx: AppContext): {
  app: Express;
  listener: RequestListener;
  serverOptions: ServerOptions;
} {
  const app = express();
  const metrics = new Metrics();
  const observe = observer(ctx, metrics);
  app.disable("x-powered-by");
  // PostgREST sends no ETag, and hashing every response body costs each request.
  app.set("etag", false);
  app.set("query parser", "simple");
  // Paths match exactly as the spec writes them: `/v1/PROJECTS/...` is not `/v1/projects/...`.
  app.set("case sensitive routing", true);
  // req.ip, the one client address of limits, bans, hooks and logs: from X-Forwarded-For only when the
  // connection comes from a proxy the operator trusts (its right-most untrusted entry), else the socket's.
  app.set("trust proxy", ctx.config.trustedProxies.length > 0 ? ctx.config.trustedProxies : false);

  // Request log: method and path only (the query string may carry an apikey, headers carry tokens).
  app.use(
    pinoHttp({
      logger: ctx.log,
      customLogLevel: () => "info",
      customSuccessMessage: () => "request",
      customErrorMessage: () => "request",
      // A 5xx is logged with its cause where it happens; the request line only records it.
      customErrorObject: (_req, _res, _err, value: Record<string, unknown>) => {
        const { err: _cause, ...line } = value;
        return line;
      },
      serializers: {
        req: (req: { method: string; url: string }) => ({ method: req.method, path: req.url.split("?")[0] }),
        res: (res: { statusCode: number }) => ({ status: res.statusCode }),
      },
    }),
  );
  // Metrics, usage and the projects' edge logs: interface, status, time.
  app.use((req: Request, _res: Response, next: NextFunction) => {
    // Routers mounted under a prefix rewrite req.path: keep the path the request came with.
    observe(req, req.path);
    next();
  });

  app.get("/health", async (_req, res) => {
    if (ctx.ready === false) {
      res.status(503).json({ status: "starting", database: "starting" });
      return;
    }
    // The database is probed; when it does not answer, the embedded cluster's supervisor says why. (Its own
    // state may lag a moment behind a postmaster that already accepts connections: the probe decides.)
    const reachable = await databaseReachable(ctx);
    const down = reachable ? undefined : ctx.databaseDown?.();
    if (down) {
      res.status(503).json({ status: "database_restarting", database: "restarting", reason: down });
      return;
    }
    if (!reachable) {
      res.status(503).json({ status: "unavailable", database: "unreachable" });
      return;
    }
    const refused = ctx.clusterDisk?.refusal();
    if (refused) res.status(200).json({ status: "read_only", database: "reachable", reason: refused });
    else res.status(200).json({ status: "ok", database: "reachable" });
  });
  app.get("/metrics", metrics.handler());

  app.use("/functions/v1", functionsRouter(ctx));
  // Browser apps call the data APIs from their own origin, as they call the platform's: CORS for any origin
  // (the key or token in the request decides, never a cookie). Edge functions answer their own preflights.
  app.use(["/graphql/v1", "/rest/v1", "/storage/v1", "/auth/v1", "/realtime/v1"], dataCors);
  app.use(graphqlRouter(ctx));
  app.use("/rest/v1", restRouter(ctx));
  const storage = storageRouter(ctx);
  app.use("/storage/v1", storage);
  app.use("/realtime/v1", realtimeRouter(ctx));
  app.use("/auth/v1", authRouter(ctx));
  // Mounted at the root, its error handler also answers the errors the GraphQL and REST routes pass on
  // (malformed or too large bodies, unexpected failures).
  app.use(managementRouter(ctx));
  // The dashboard: /studio/... and its page paths (/projects, /project/<ref>/...), which no API uses.
  app.use(studioRouter(ctx));

  app.use((_req, res) => {
    res.status(404).json({ message: "Not found" });
  });
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (err as { status?: number }).status;
    if (typeof status === "number" && status >= 400 && status < 500) {
      res.status(status).json({ message: (err as Error).message });
      return;
    }
    ctx.log.error({ err }, "request failed");
    res.status(500).json({ message: "Internal server error" });
  });
  const data = dataPath(ctx, { app, cors: dataCors, storage, observe, fail: managementErrorHandler(ctx) });
  const listener: RequestListener = (req, res) => {
    if (!data(req, res)) app(req, res);
  };
  const serverOptions = expressMessages(app);
  // Functions reach their own project's API through this handler on a socket of their own.
  setPublicApi(ctx, { listener, serverOptions });
  return { app, listener, serverOptions };
}

const STOPPING_BODY = JSON.stringify({ message: "Server is shutting down; retry on another node" });

/**
 * The HTTP side of a stop: the server accepts no new connection, the requests in flight finish and answer with
 * `Connection: close`, and a request that still arrives on an open connection (pipelined behind one in flight,
 * or its headers still on their way) answers 503 with `Connection: close`, so its client goes elsewhere.
 */
export class HttpDrain {
  private readonly inFlight = new Set<ServerResponse>();
  private draining = false;
  /** A response's `close` listener: one function for every response, no closure per request. */
  private readonly forget: (this: ServerResponse) => void;

  constructor(private readonly serve: RequestListener) {
    const inFlight = this.inFlight;
    this.forget = function () {
      inFlight.delete(this);
    };
  }

  readonly listener: RequestListener = (req, res) => {
    if (this.draining) {
      res.shouldKeepAlive = false;
      res.writeHead(503, {
        "Content-Type": "application/json",
        "Content-Length": Buffer.byteLength(STOPPING_BODY),
        Connection: "close",
      });
      res.end(STOPPING_BODY);
      return;
    }
    this.inFlight.add(res);
    res.on("close", this.forget);
    this.serve(req, res);
  };

  /** Starts draining `server`; settles once every connection is closed (requests answered, sockets closed). */
  drain(server: Server): Promise<void> {
    this.draining = true;
    for (const res of this.inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
    // Also closes the idle kept-alive connections at once.
    return new Promise((resolve) => server.close(() => resolve()));
  }
}
