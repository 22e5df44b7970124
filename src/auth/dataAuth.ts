import { jwtVerify } from "jose";
import { LRUCache } from "lru-cache";
import type { ProjectRuntime } from "../projects/runtime";
import { isOpaqueKey, lookupOpaqueKey, OPAQUE_KEY_ROLES, type OpaqueKey } from "./apiKeys";
import { canAssume } from "./roles";
import { verifyJwt } from "./verifyJwt";

/** Who a data request runs as: the Postgres role and the claims RLS policies read. */
export interface RequestAuth {
  role: string;
  claims: Record<string, unknown>;
}

/** Which credential check refused a data request. */
export type DataAuthCode = "no_api_key" | "invalid_api_key" | "invalid_jwt";

/** A refused credential, with the check that failed (`code`) and a message that says why. */
export class DataAuthError extends Error {
  constructor(
    readonly code: DataAuthCode,
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

export interface DataCredentials {
  /** `apikey` header or query parameter. */
  apikey: string | undefined;
  /** `Authorization` header. */
  authorization: string | undefined;
}

const LEGACY_KEY_ROLES = new Set(["anon", "service_role"]);
/** Lifetime of the internal claims an opaque key is turned into: one request. */
const INTERNAL_TOKEN_SECONDS = 60;

const INVALID_KEY_HINT = "Double check your project's API key.";

/** Claims standing for an opaque key: callers never see them, RLS policies read them. */
function internalClaims(project: ProjectRuntime, key: OpaqueKey): Record<string, unknown> {
  const iat = Math.floor(Date.now() / 1000);
  const template = key.type === "secret" ? (key.template ?? {}) : {};
  const role = typeof template.role === "string" ? template.role : OPAQUE_KEY_ROLES[key.type];
  return { ...template, iss: "strata", ref: project.ref, role, iat, exp: iat + INTERNAL_TOKEN_SECONDS };
}

/**
 * Legacy keys that verified, by project secret and key: every request carries the same key, and its
 * signature only depends on the secret, so it is checked once. Expiry is still checked on every use;
 * a changed secret misses the cache; the enabled flag is read on every request. The 1,000 most recently
 * used keys are kept.
 */
const verifiedLegacyKeys = new LRUCache<string, Record<string, unknown>>({ max: 1000 });

async function verifiedLegacyClaims(
  secret: string,
  apikey: string,
): Promise<Record<string, unknown> | undefined> {
  const cacheKey = `${secret}\u0000${apikey}`;
  const cached = verifiedLegacyKeys.get(cacheKey);
  if (cached) {
    if (typeof cached.exp !== "number" || cached.exp > Date.now() / 1000) return cached;
    verifiedLegacyKeys.delete(cacheKey);
    return undefined;
  }
  const claims = await jwtVerify(apikey, new TextEncoder().encode(secret), { algorithms: ["HS256"] }).then(
    (r) => r.payload as Record<string, unknown>,
    () => undefined,
  );
  if (claims && LEGACY_KEY_ROLES.has(claims.role as string)) {
    verifiedLegacyKeys.set(cacheKey, claims);
  }
  return claims;
}

/** A legacy key: an HS256 JWT of the project secret with role anon or service_role, while enabled. */
async function authenticateLegacyKey(project: ProjectRuntime, apikey: string): Promise<RequestAuth> {
  const claims = await verifiedLegacyClaims(project.record.jwtSecret, apikey);
  const role = claims?.role;
  if (typeof role !== "string" || !LEGACY_KEY_ROLES.has(role) || !project.record.legacyKeysEnabled) {
    throw new DataAuthError("invalid_api_key", "Invalid API key", INVALID_KEY_HINT);
  }
  return { role, claims: claims! };
}

/** Checks the API key and returns the role it stands for. Opaque keys are looked up on every request. */
async function authenticateApiKey(project: ProjectRuntime, apikey: string | undefined): Promise<RequestAuth> {
  if (!apikey) {
    throw new DataAuthError(
      "no_api_key",
      "No API key found in request",
      "No `apikey` request header or url param was found.",
    );
  }
  if (!isOpaqueKey(apikey)) return authenticateLegacyKey(project, apikey);
  const key = await lookupOpaqueKey(project.platformPool, project.ref, apikey);
  if (!key) throw new DataAuthError("invalid_api_key", "Invalid API key", INVALID_KEY_HINT);
  const claims = internalClaims(project, key);
  const role = claims.role as string;
  if (!(await canAssume(project, role))) {
    throw new DataAuthError(
      "invalid_api_key",
      `Invalid API key: its template's role "${role}" is not allowed`,
    );
  }
  return { role, claims };
}

/** Verifies a bearer JWT and checks that its role is one the authenticator may assume. */
export async function authenticateBearer(
  project: ProjectRuntime,
  token: string,
  defaultRole: string,
  options: { thirdParty?: boolean } = {},
): Promise<RequestAuth> {
  let claims: Record<string, unknown>;
  try {
    claims = (await verifyJwt(project, token, options)) as Record<string, unknown>;
  } catch (e) {
    throw new DataAuthError("invalid_jwt", `Invalid JWT: ${(e as Error).message}`);
  }
  const role = typeof claims.role === "string" && claims.role !== "" ? claims.role : defaultRole;
  if (!(await canAssume(project, role))) {
    throw new DataAuthError("invalid_jwt", `Invalid JWT: role "${role}" is not allowed`);
  }
  return { role, claims: { ...claims, role } };
}

/**
 * The request flow of DESIGN.md: the API key must be valid; a bearer JWT, when present and not the key
 * itself, decides the role and claims.
 */
export async function authenticateDataRequest(
  project: ProjectRuntime,
  creds: DataCredentials,
): Promise<RequestAuth> {
  const keyAuth = await authenticateApiKey(project, creds.apikey);
  const bearer = bearerOf(creds);
  if (!bearer || bearer === creds.apikey) return keyAuth;
  return authenticateBearer(project, bearer, keyAuth.role);
}

/** The token of an `Authorization: Bearer` header, if any. */
export function bearerOf(creds: DataCredentials): string | undefined {
  return /^bearer\s+(.+)$/i.exec(creds.authorization ?? "")?.[1]?.trim();
}

/** Reads the credentials of a data request from its headers (any case) and, for REST, its query. */
export function credentialsOf(
  headers: Record<string, string | string[] | undefined>,
  query?: URLSearchParams,
): DataCredentials {
  const header = (name: string) => {
    const v = headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  return {
    apikey: header("apikey") ?? query?.get("apikey") ?? undefined,
    authorization: header("authorization"),
  };
}
