import { invalidBucketName, invalidKey } from "./errors";

/**
 * Bucket ids and object names as the platform's storage server accepts them: printable ASCII from a safe
 * set (no NUL, no backslash, no control characters), names up to 1024 bytes with `/` between folders.
 * Strata also refuses `.` and `..` segments and empty segments, so no name can address a path outside
 * its bucket in any backend or listing.
 */
const SAFE = /^[A-Za-z0-9_/!.*'() &$=@;:+,?-]*$/;
const MAX_NAME_BYTES = 1024;
const MAX_BUCKET_ID = 100;

/**
 * Bucket ids are narrower than the platform's: no quotes, semicolons, `=`, `&`, `$`, `:`, `,` or `?`, which
 * only ever appear in ids made to attack something (and must be escaped in every URL).
 */
const BUCKET_SAFE = /^[A-Za-z0-9_.!*()@+ -]*$/;

export function checkBucketId(id: unknown): string {
  if (typeof id !== "string" || !id.length || id.length > MAX_BUCKET_ID || !BUCKET_SAFE.test(id)) {
    throw invalidBucketName();
  }
  if (id === "." || id === ".." || id !== id.trim()) throw invalidBucketName();
  return id;
}

export function checkObjectName(name: unknown): string {
  if (typeof name !== "string" || !name.length) throw invalidKey(String(name ?? ""));
  if (Buffer.byteLength(name) > MAX_NAME_BYTES || !SAFE.test(name)) throw invalidKey(name);
  const segments = name.split("/");
  if (segments.some((s) => s === "" || s === "." || s === "..")) throw invalidKey(name);
  return name;
}

/**
 * The object name of a wildcard route (`/object/:bucket/*name`): Express gives its decoded segments; a
 * segment that decoded to a `/` came from an encoded slash, which does not make a folder.
 */
export function nameOfSegments(segments: unknown): string {
  const parts = Array.isArray(segments) ? (segments as string[]) : [String(segments ?? "")];
  if (parts.some((p) => p.includes("/"))) throw invalidKey(parts.join("%2F"));
  return checkObjectName(parts.join("/"));
}

/** A listing prefix: a folder path, with or without its trailing slash; empty for the bucket's root. */
export function checkPrefix(prefix: unknown): string {
  if (prefix === undefined || prefix === null || prefix === "") return "";
  if (typeof prefix !== "string") throw invalidKey(String(prefix));
  const trimmed = prefix.replace(/\/+$/, "");
  if (!trimmed) return "";
  checkObjectName(trimmed);
  return `${trimmed}/`;
}
