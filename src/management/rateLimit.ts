import type { Request, RequestHandler, Response } from "express";
import { RateLimiterRes, type RateLimiterPostgres } from "rate-limiter-flexible";
import type { AppContext } from "../context";
import { postgresRateLimiter } from "../http/rateLimiter";
import { match } from "path-to-regexp";
import { HttpError } from "./http";
import { addressedBy } from "./paths";
import { managementRoutes } from "./route";

/** The project or organization a request addresses; requests to one never count against another. */
function scopeOf(path: string): string {
  const { project, organization } = addressedBy(path);
  if (project) return `project:${project}`;
  if (organization) return `org:${organization}`;
  return "account";
}

/** A route's own limit (RouteSpec.rateLimits), with its counter. */
interface StricterLimit {
  method: string;
  matches: ReturnType<typeof match>;
  points: number;
  limiter: RateLimiterPostgres;
}

/** The tracking identity, in the spec's order: OAuth application, else user, else IP address. */
function identityOf(req: Request): string {
  if (req.principal?.oauthAppId) return `app:${req.principal.oauthAppId}`;
  if (req.principal) return `user:${req.principal.userId}`;
  return `ip:${req.ip ?? "unknown"}`;
}

function setHeaders(res: Response, limit: number, state: RateLimiterRes): void {
  res.setHeader("X-RateLimit-Limit", String(limit));
  res.setHeader("X-RateLimit-Remaining", String(Math.max(0, state.remainingPoints)));
  res.setHeader("X-RateLimit-Reset", String(Math.ceil(state.msBeforeNext / 1000)));
}

/**
 * Counts every Management API request against the standard limit (`MANAGEMENT_RATE_LIMIT` per minute, per
 * identity and scope) and the stricter limits the routes declare (RouteSpec.rateLimits), in Postgres, so every Strata process on
 * the database shares the counters. Sets the X-RateLimit-* headers from the tightest limit; 429 once any
 * limit is spent, until its window ends.
 */
export function rateLimit(ctx: AppContext): RequestHandler {
  const store = (keyPrefix: string, points: number, seconds: number) =>
    postgresRateLimiter(ctx.platformPool, { keyPrefix, points, seconds, sweeps: keyPrefix === "mgmt" });
  const standardPoints = ctx.config.managementRateLimit;
  const standard = { limiter: store("mgmt", standardPoints, 60), points: standardPoints };
  // The routes' own limits, read once every route is registered (at the first request); one counter per
  // limit name, however many servers of this process registered the route.
  let stricter: StricterLimit[] | undefined;
  const stricterLimits = () => {
    if (stricter) return stricter;
    const byName = new Map<string, StricterLimit>();
    for (const spec of managementRoutes) {
      for (const l of spec.rateLimits ?? []) {
        const points = Math.min(l.points, standardPoints);
        if (byName.has(l.name)) continue;
        byName.set(l.name, {
          method: spec.method.toUpperCase(),
          matches: match(spec.path),
          points,
          limiter: store(`mgmt-${l.name}`, points, l.seconds),
        });
      }
    }
    return (stricter = [...byName.values()]);
  };

  return async (req, res, next) => {
    const path = req.originalUrl.split("?")[0];
    const key = `${identityOf(req)}:${scopeOf(path)}`;
    const applicable = [
      standard,
      ...stricterLimits().filter((l) => l.method === req.method && l.matches(path) !== false),
    ];
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
