import express, {
  Router,
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
} from "express";
import type { AppContext } from "../../context";
import { refOfHost } from "../../http/gate";
import { PAGE_PATH, studioAssets, studioPage } from "./pages";
import { callPublicApi, forwardToPublicApi } from "./publicApi";
import { cookieOf, endSession, SESSION_COOKIE, SESSION_SECONDS, sessionToken, startSession } from "./session";

/**
 * Studio, the dashboard: its pages, its sign-in session and the forwarder that turns the session into the
 * Management API's bearer token. Everything lives under /studio (plus the page paths, which no API uses) and
 * only at hosts that name no project, so a project's host (whose edge functions a tenant writes) never shares
 * an origin with a signed-in dashboard.
 *
 * Cross-site request forgery: the session cookie is HttpOnly and SameSite=Strict, and every session or API
 * call must carry `X-Strata-Studio: 1` (a custom header: another origin's page cannot send it without a CORS
 * preflight, which these routes never grant) and, when the browser names one, an Origin of this very host.
 */

const STUDIO_HEADER = "x-strata-studio";
const API_PATH = /^\/v[12]\//;

/** Whether `url` (path and query) addresses the Management API as written: no dot segments, no other prefix. */
function isApiPath(url: string): boolean {
  const path = url.split("?")[0];
  return (
    API_PATH.test(path) &&
    new URL(path, "http://studio.invalid").pathname === path &&
    !/%2e|%2f|\\/i.test(path)
  );
}

/**
 * How a browser proves who it is: a token of the Management API, either a personal access token the user typed
 * or the session token the browser got from `POST /v1/account/sign-in` with email and password (called by the
 * browser itself, so that endpoint's per-address limits count the request the user sent).
 */
type Credentials = { access_token: string };

function credentialsOf(body: unknown): Credentials | undefined {
  const token = (body as { access_token?: unknown } | undefined)?.access_token;
  return typeof token === "string" && token.length > 0 && token.length <= 512
    ? { access_token: token }
    : undefined;
}

/** The Management API token a sign-in yields, checked by the API itself (`GET /v1/profile`), or undefined. */
async function tokenFor(req: Request, credentials: Credentials): Promise<string | undefined> {
  const profile = await callPublicApi(req, "GET", "/v1/profile", credentials.access_token);
  return profile.status === 200 ? credentials.access_token : undefined;
}

function cookieHeader(req: Request, value: string, maxAge: number): string {
  const secure = req.secure ? "; Secure" : "";
  return `${SESSION_COOKIE}=${value}; Path=/studio; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure}`;
}

/** Only the dashboard's own pages may call: the custom header, and the Origin (when sent) of this host. */
const sameOriginOnly: RequestHandler = (req, res, next) => {
  const origin = req.headers.origin;
  let originHost: string | undefined;
  try {
    originHost = origin === undefined ? req.headers.host : new URL(origin).host;
  } catch {
    originHost = undefined;
  }
  if (req.headers[STUDIO_HEADER] !== "1" || originHost !== req.headers.host) {
    res.status(403).json({ message: "Forbidden: Studio calls come from Studio's own pages" });
    return;
  }
  next();
};

/** The session's token on `res.locals.token`, or 401. */
function requireSession(ctx: AppContext): RequestHandler {
  return async (req, res, next) => {
    const token = await sessionToken(ctx.platformPool, cookieOf(req.headers.cookie, SESSION_COOKIE));
    if (!token) {
      res.status(401).json({ message: "Unauthorized: sign in to Studio" });
      return;
    }
    res.locals.token = token;
    next();
  };
}

function asyncRoute(handler: (req: Request, res: Response) => Promise<void>): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => void handler(req, res).catch(next);
}

export function studioRouter(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  // A project's host serves its APIs only.
  router.use((req, _res, next) => (refOfHost(ctx, req.headers.host) === undefined ? next() : next("router")));
  router.use("/studio/assets", studioAssets());

  router.use(["/studio/session", "/studio/api"], sameOriginOnly);
  router.post(
    "/studio/session",
    express.json({ limit: "4kb" }),
    asyncRoute(async (req, res) => {
      const credentials = credentialsOf(req.body);
      if (!credentials) {
        res.status(400).json({ message: "Bad request: access_token is required" });
        return;
      }
      const token = await tokenFor(req, credentials);
      if (!token) {
        res.status(401).json({ message: "Unauthorized: the access token is not valid" });
        return;
      }
      const value = await startSession(ctx.platformPool, token);
      res.setHeader("Set-Cookie", cookieHeader(req, value, SESSION_SECONDS));
      res.status(201).json({ signed_in: true });
    }),
  );
  router.get(
    "/studio/session",
    requireSession(ctx),
    asyncRoute(async (req, res) => {
      const profile = await callPublicApi(req, "GET", "/v1/profile", res.locals.token as string);
      // The projects' data APIs answer at <ref>.<domain> on this server's port.
      res.json({ signed_in: true, profile: profile.body, project_domain: ctx.config.domain });
    }),
  );
  router.delete(
    "/studio/session",
    asyncRoute(async (req, res) => {
      const cookie = cookieOf(req.headers.cookie, SESSION_COOKIE);
      // A token from an email and password sign-in ends with Studio's session (a personal access token answers
      // 400 there and stays: it is the user's to delete).
      const token = await sessionToken(ctx.platformPool, cookie);
      if (token) await callPublicApi(req, "POST", "/v1/account/sign-out", token);
      await endSession(ctx.platformPool, cookie);
      res.setHeader("Set-Cookie", cookieHeader(req, "", 0));
      res.status(204).end();
    }),
  );
  // Mounted at /studio/api: req.url is the Management API path and query (`/v1/projects?...`).
  router.use("/studio/api", requireSession(ctx), (req, res) => {
    if (!isApiPath(req.url)) {
      res.status(404).json({ message: "Not found" });
      return;
    }
    forwardToPublicApi(req, res, req.url, res.locals.token as string);
  });

  router.get(PAGE_PATH, studioPage(ctx));
  return router;
}
