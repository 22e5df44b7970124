import type pg from "pg";
import { RateLimiterPostgres } from "rate-limiter-flexible";

/**
 * A rate limiter counting in platform.rate_limits, so that every Strata process on the database shares its
 * counters. All limiters share the table; the one made with `sweeps` clears expired counters.
 */
export function postgresRateLimiter(
  pool: pg.Pool,
  options: { keyPrefix: string; points: number; seconds: number; sweeps?: boolean },
): RateLimiterPostgres {
  return new RateLimiterPostgres({
    storeClient: pool,
    storeType: "pool",
    schemaName: "platform",
    tableName: "rate_limits",
    tableCreated: true,
    keyPrefix: options.keyPrefix,
    points: options.points,
    duration: options.seconds,
    clearExpiredByTimeout: options.sweeps ?? false,
  });
}
