import type pg from "pg";
import { RateLimiterRes, type RateLimiterPostgres } from "rate-limiter-flexible";
import { postgresRateLimiter } from "../../http/rateLimiter";
import type { AuthSettings } from "../authConfig";
import type { LimitBucket } from "../call";
import { AuthApiError } from "../errors";

/** The windows the auth server counts in: requests per 5 minutes, anonymous sign-ins and messages per hour. */
const FIVE_MINUTES = 300;
const HOUR = 3600;

interface Bucket {
  /** Counted per client address within the project, or for the whole project. */
  per: "address" | "project";
  seconds: number;
  /** The limit, from the project's auth config (read live). */
  points(settings: AuthSettings): number;
  refusal(): AuthApiError;
}

const overRequestLimit = () => new AuthApiError(429, "over_request_rate_limit", "Request rate limit reached");

const BUCKETS: Record<LimitBucket, Bucket> = {
  otp: {
    per: "address",
    seconds: FIVE_MINUTES,
    points: (s) => Number(s.rate_limit_otp ?? 30),
    refusal: overRequestLimit,
  },
  verify: {
    per: "address",
    seconds: FIVE_MINUTES,
    points: (s) => Number(s.rate_limit_verify ?? 30),
    refusal: overRequestLimit,
  },
  token: {
    per: "address",
    seconds: FIVE_MINUTES,
    points: (s) => Number(s.rate_limit_token_refresh),
    refusal: overRequestLimit,
  },
  anon: {
    per: "address",
    seconds: HOUR,
    points: (s) => s.rate_limit_anonymous_users,
    refusal: overRequestLimit,
  },
  // The platform's fixed passkey limit (no config field sets it).
  passkey: {
    per: "address",
    seconds: FIVE_MINUTES,
    points: () => 30,
    refusal: overRequestLimit,
  },
  email: {
    per: "project",
    seconds: HOUR,
    points: (s) => Number(s.rate_limit_email_sent ?? 2),
    refusal: () => new AuthApiError(429, "over_email_send_rate_limit", "email rate limit exceeded"),
  },
  sms: {
    per: "project",
    seconds: HOUR,
    points: (s) => Number(s.rate_limit_sms_sent ?? 30),
    refusal: () => new AuthApiError(429, "over_sms_send_rate_limit", "SMS rate limit exceeded"),
  },
};

export interface RateLimits {
  consume(
    bucket: LimitBucket,
    of: { ref: string; ip: string | undefined; settings: AuthSettings },
  ): Promise<void>;
}

/**
 * The auth server's rate limits, counted in Postgres (shared by every Strata process). A limit is read
 * live from the config: one limiter per bucket, value and window.
 */
export function rateLimits(platformPool: pg.Pool): RateLimits {
  const limiters = new Map<string, RateLimiterPostgres>();
  return {
    async consume(name, { ref, ip, settings }) {
      const bucket = BUCKETS[name];
      const points = bucket.points(settings);
      const keyPrefix = `auth-${name}-${points}-${bucket.seconds}`;
      let limiter = limiters.get(keyPrefix);
      if (!limiter) {
        limiter = postgresRateLimiter(platformPool, { keyPrefix, points, seconds: bucket.seconds });
        limiters.set(keyPrefix, limiter);
      }
      const key = bucket.per === "address" ? `${ref}:${ip ?? "unknown"}` : ref;
      await limiter.consume(key).catch((e: unknown) => {
        throw e instanceof RateLimiterRes ? bucket.refusal() : e;
      });
    },
  };
}
