import { invalidJwt, invalidParameter, invalidRequest } from "../errors";
import { checkBucketId, checkObjectName, nameOfSegments } from "../names";

/**
 * The inputs of /storage/v1 routes as the route table declares them: a schema reads the request's path
 * parameters, query or JSON body (`Record<string, unknown>`) into typed values and throws the storage error
 * of the first bad field, as the platform's JSON schemas do.
 */
export type Schema<T> = (raw: Record<string, unknown>) => T;

export type Fields = Record<string, unknown>;

export interface BucketParams {
  bucketId: string;
}
export interface ObjectParams {
  bucketId: string;
  name: string;
}

export const bucketParams: Schema<BucketParams> = (p) => ({ bucketId: checkBucketId(p.bucket) });

/** `:bucket/*name`: Express gives the name's decoded segments. */
export const objectParams: Schema<ObjectParams> = (p) => ({
  bucketId: checkBucketId(p.bucket),
  name: nameOfSegments(p.name),
});

/** `?token=` of a signed URL. */
export const tokenQuery: Schema<{ token: string }> = (q) => {
  if (typeof q.token !== "string" || !q.token) {
    throw invalidJwt("querystring must have required property 'token'");
  }
  return { token: q.token };
};

/** A JSON body must be an object; none at all reads as an empty one. */
export function objectOf(body: unknown): Fields {
  if (body === undefined) return {};
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw invalidRequest("body must be a JSON object");
  }
  return body as Fields;
}

export function oneOf<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined || value === null || value === "") return fallback;
  if (typeof value === "string" && (allowed as readonly string[]).includes(value)) return value as T;
  throw invalidRequest(`must be one of ${allowed.join(", ")}: ${String(value)}`);
}

export function optionalCount(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0) {
    throw invalidRequest(`${name} must be a whole number`);
  }
  return n;
}

/** A list of 1 to `max` object names (`what` names the field in the refusal). */
export function objectNamesOf(value: unknown, what: string, { min = 0, max = 1000 } = {}): string[] {
  if (!Array.isArray(value) || value.length < min || value.length > max) {
    const count = min ? `${min} to ${max}` : `at most ${max}`;
    throw invalidRequest(`${what} must be a list of ${count} object names`);
  }
  return value.map((p) => checkObjectName(p));
}

const EXPIRY_MAX = 60 * 60 * 24 * 365 * 10;

/** A signed URL's life in seconds: up to ten years. */
export function expiresInOf(value: unknown): number {
  const n = typeof value === "string" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > EXPIRY_MAX) {
    throw invalidParameter("expiresIn");
  }
  return n;
}
