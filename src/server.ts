import cors from "cors";
import express, { type Express, type NextFunction, type Request, type Response } from "express";
import { pinoHttp } from "pino-http";
import type { AppContext } from "./context";
import { authRouter } from "./auth/router";
import { functionsRouter } from "./functions/router";
import { graphqlRouter } from "./graphql/router";
import { refOfHost } from "./http/gate";
import { interfaceOf, Metrics } from "./http/metrics";
import { managementRouter } from "./management/router";
import { restRouter } from "./rest/router";
import { realtimeRouter } from "./realtime/routes";
import { storageRouter } from "./storage/routes";

/** What a browser may send to and read from the data APIs. */
const DATA_CORS: cors.CorsOptions = {
  origin: "*",
  methods: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
  // Unlisted: the headers a preflight asks for are allowed (apikey, authorization, x-client-info, prefer, ...).
  exposedHeaders: [
    "content-range",
    "content-profile",
    "content-disposition",
    "content-length",
    "content-type",
    "etag",
    "link",
    "location",
    "preference-applied",
    "range-unit",
    "x-total-count",
    "sb-error-code",
  ],
  maxAge: 86_400,
};

/** Answers whether the main database is reachable (within two seconds). */
async function databaseReachable(ctx: AppContext): Promise<boolean> {
  const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 2000).unref());
  const probe = ctx.platformPool.query("select 1").then(
    () => true,
    () => false,
  );
  return Promise.race([probe, timeout]);
}

/** The one HTTP app: data interfaces, Management API, health and metrics. */
export function createApp(ctx: AppContext): Express {
  const app = express();
  const metrics = new Metrics();
  app.disable("x-powered-by");
  // PostgREST sends no ETag, and hashing every response body costs each request.
  app.set("etag", false);
  app.set("query parser", "simple");
  // Paths match exactly as the spec writes them: `/v1/PROJECTS/...` is not `/v1/projects/...`.
  app.set("case sensitive routing", true);

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
  // Metrics and usage: interface, status, time.
  app.use((req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    // Routers mounted under a prefix rewrite req.path: keep the path the request came with.
    const path = req.path;
    res.on("finish", () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const iface = interfaceOf(path);
      metrics.observe(iface, res.statusCode, seconds);
      if (
        iface === "rest" ||
        iface === "graphql" ||
        iface === "auth" ||
        iface === "storage" ||
        iface === "realtime"
      ) {
        // GraphQL counts as REST traffic, as the platform's usage report does.
        ctx.usage?.record(
          refOfHost(ctx, req.headers.host) ?? ctx.registry.defaultRef,
          iface === "graphql" ? "rest" : iface,
        );
      }
    });
    next();
  });

  app.get("/health", async (_req, res) => {
    if (ctx.ready === false) {
      res.status(503).json({ status: "starting", database: "starting" });
      return;
    }
    const up = await databaseReachable(ctx);
    res
      .status(up ? 200 : 503)
      .json({ status: up ? "ok" : "unavailable", database: up ? "reachable" : "unreachable" });
  });
  app.get("/metrics", metrics.handler());

  app.use("/functions/v1", functionsRouter(ctx));
  // Browser apps call the data APIs from their own origin, as they call the platform's: CORS for any origin
  // (the key or token in the request decides, never a cookie). Edge functions answer their own preflights.
  app.use(["/graphql/v1", "/rest/v1", "/storage/v1", "/auth/v1", "/realtime/v1"], cors(DATA_CORS));
  app.use(graphqlRouter(ctx));
  app.use("/rest/v1", restRouter(ctx));
  app.use("/storage/v1", storageRouter(ctx));
  app.use("/realtime/v1", realtimeRouter(ctx));
  app.use("/auth/v1", authRouter(ctx));
  app.use(managementRouter(ctx));

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
  return app;
}
