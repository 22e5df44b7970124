import type { Request, RequestHandler, Response } from "express";
import { RateLimiterRes } from "rate-limiter-flexible";
import type { AppContext } from "../context";
import { postgresRateLimiter } from "../http/rateLimiter";
import { HttpError } from "./http";

/** A limit the spec sets on some endpoints, stricter than the standard one (or with a longer window). */
interface StricterLimit {
  name: string;
  method: string;
  /** Matches the request path; the spec's table names some paths without their `analytics/` or `config/` part. */
  path: RegExp;
  points: number;
  seconds: number;
}

const REF = "[a-z]{20}";
const STRICTER_LIMITS: StricterLimit[] = [
  ...["logs.all", "usage.api-counts", "usage.api-requests-count"].map((endpoint) => ({
    name: endpoint,
    method: "GET",
    path: new RegExp(`^/v1/projects/${REF}/(analytics/)?endpoints/${endpoint.replace(".", "\\.")}$`),
    points: 30,
    seconds: 60,
  })),
  {
    name: "context-minute",
    method: "GET",
    path: new RegExp(`^/v1/projects/${REF}/database/context$`),
    points: 10,
    seconds: 60,
  },
  {
    name: "context-second",
    method: "GET",
    path: new RegExp(`^/v1/projects/${REF}/database/context$`),
    points: 1,
    seconds: 1,
  },
  ...[
    ["POST", "custom-hostname/initialize"],
    ["POST", "custom-hostname/reverify"],
    ["DELETE", "custom-hostname"],
    ["GET", "vanity-subdomain"],
  ].map(([method, suffix]) => ({
    name: `${method} ${suffix}`,
    method,
    path: new RegExp(`^/v1/projects/${REF}/(config/)?${suffix}$`),
    points: 10,
    seconds: 60,
  })),
  {
    name: "migrations",
    method: "POST",
    path: new RegExp(`^/v1/projects/${REF}/database/migrations$`),
    points: 120,
    seconds: 180,
  },
];

/** The project or organization a request addresses; requests to one never count against another. */
function scopeOf(path: string): string {
  const project = new RegExp(`^/v[12]/projects/(${REF})(/|$)`).exec(path);
  if (project) return `project:${project[1]}`;
  const org = /^\/v[12]\/organizations\/([^/]+)/.exec(path);
  if (org) return `org:${org[1]}`;
  return "account";
}

/** The tracking identity, in the spec's order: OAuth application, else user, else IP address. */
function identityOf(req: Request): string {
  if (req.principal?.oauthAppId) return `app:${req.principal.oauthAppId}`;
  if (req.principal) return `user:${req.principal.userId}`;
  return `ip:${req.socket.remoteAddress ?? "unknown"}`;
}

function setHeaders(res: Response, limit: number, state: RateLimiterRes): void {
  res.setHeader("X-RateLimit-Limit", String(limit));
  res.setHeader("X-RateLimit-Remaining", String(Math.max(0, state.remainingPoints)));
  res.setHeader("X-RateLimit-Reset", String(Math.ceil(state.msBeforeNext / 1000)));
}

/**
 * Counts every Management API request against the standard limit (`MANAGEMENT_RATE_LIMIT` per minute, per
 * identity and scope) and the spec's stricter per-endpoint limits, in Postgres, so every Strata process on
 * the database shares the counters. Sets the X-RateLimit-* headers from the tightest limit; 429 once any
 * limit is spent, until its window ends.
 */
export function rateLimit(ctx: AppContext): RequestHandler {
  const store = (keyPrefix: string, points: number, seconds: number) =>
    postgresRateLimiter(ctx.platformPool, { keyPrefix, points, seconds, sweeps: keyPrefix === "mgmt" });
  const standardPoints = ctx.config.managementRateLimit;
  const standard = { limiter: store("mgmt", standardPoints, 60), points: standardPoints };
  const stricter = STRICTER_LIMITS.map((l) => ({
    ...l,
    points: Math.min(l.points, standardPoints),
    limiter: store(`mgmt-${l.name}`, Math.min(l.points, standardPoints), l.seconds),
  }));

  return async (req, res, next) => {
    const path = req.originalUrl.split("?")[0];
    const key = `${identityOf(req)}:${scopeOf(path)}`;
    const applicable = [standard, ...stricter.filter((l) => l.method === req.method && l.path.test(path))];
    const outcomes = await Promise.allSettled(applicable.map((l) => l.limiter.consume(key)));
    const failure = outcomes.find(
      (o): o is PromiseRejectedResult => o.status === "rejected" && !(o.reason instanceof RateLimiterRes),
    );
    if (failure) return next(failure.reason);
    const states = outcomes.map((o, i) => ({
      points: applicable[i].points,
      state: (o.status === "fulfilled" ? o.value : o.reason) as RateLimiterRes,
      refused: o.status === "rejected",
    }));
    const refused = states
      .filter((s) => s.refused)
      .sort((a, b) => b.state.msBeforeNext - a.state.msBeforeNext);
    const tightest =
      refused[0] ??
      [...states].sort((a, b) => a.state.remainingPoints - b.state.remainingPoints || a.points - b.points)[0];
    setHeaders(res, tightest.points, tightest.state);
    if (refused.length) {
      res.setHeader("Retry-After", String(Math.ceil(tightest.state.msBeforeNext / 1000)));
      return next(
        new HttpError(429, "Too many requests: rate limit exceeded, retry after the window resets"),
      );
    }
    next();
  };
}
