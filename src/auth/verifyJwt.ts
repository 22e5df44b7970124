import { decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import { LRUCache } from "lru-cache";
import type { ProjectRuntime } from "../projects/runtime";
import { kekOf } from "../platform/kek";
import { keyOf, verifyingKey } from "./signingKeys";
import { keySetOf, thirdPartyIntegrations } from "./thirdParty";

/** Why a token was refused; the caller turns it into its own 401 shape. */
export class JwtRejected extends Error {}

const ASYMMETRIC = new Set(["ES256", "RS256", "EdDSA"]);
/** Every accepted token expires: a token without `exp` would be valid forever. */
const REQUIRED = { requiredClaims: ["exp"] };

function reason(e: unknown): string {
  if (e instanceof JwtRejected) return e.message;
  if (e instanceof joseErrors.JWTExpired) return "JWT expired";
  if (e instanceof joseErrors.JWTClaimValidationFailed) return `JWT ${e.message}`;
  if (e instanceof joseErrors.JWSSignatureVerificationFailed) return "invalid JWT signature";
  return (e as Error).message;
}

/**
 * HS256 tokens that verified with a project secret, by secret and token: a client sends the same token
 * with every request until it refreshes it, and its signature depends only on the secret, so it is checked
 * once. Expiry is checked on every use (an expired token is verified again, which refuses it with jose's
 * reason); `nbf` only becomes truer with time; a changed secret misses the cache. The 10,000 most recently
 * used tokens are kept.
 */
const verifiedTokens = new LRUCache<string, JWTPayload>({ max: 10_000 });

/** A token's key in verifiedTokens. */
const secretTokenKey = (project: ProjectRuntime, token: string) =>
  `${project.record.jwtSecret}\u0000${token}`;

/** The claims of a token that verified with the project's secret and has not expired since, if it did. */
function verifiedWithSecret(project: ProjectRuntime, token: string): JWTPayload | undefined {
  const cached = verifiedTokens.get(secretTokenKey(project, token));
  return cached && (cached.exp as number) > Math.floor(Date.now() / 1000) ? cached : undefined;
}

async function verifyWithSecret(project: ProjectRuntime, token: string): Promise<JWTPayload> {
  const cached = verifiedWithSecret(project, token);
  if (cached) return cached;
  const secret = new TextEncoder().encode(project.record.jwtSecret);
  const { payload } = await jwtVerify(token, secret, { algorithms: ["HS256"], ...REQUIRED });
  verifiedTokens.set(secretTokenKey(project, token), payload);
  return payload;
}

/** Roles a third-party token may take: it stands for a user of another provider, never for the service. */
const THIRD_PARTY_ROLES = new Set(["anon", "authenticated"]);

/**
 * Tries the project's third-party integrations; the first whose keys verify the token wins. Its issuer (the
 * integration's OIDC issuer) and audience, when set, must match; its role must be anon or authenticated.
 */
async function verifyThirdParty(project: ProjectRuntime, token: string): Promise<JWTPayload | undefined> {
  for (const integration of await thirdPartyIntegrations(project.platformPool, project.ref)) {
    let payload: JWTPayload;
    try {
      const keys = await keySetOf(integration);
      payload = (
        await jwtVerify(token, keys, {
          algorithms: [...ASYMMETRIC],
          ...REQUIRED,
          ...(integration.oidc_issuer_url ? { issuer: integration.oidc_issuer_url.replace(/\/$/, "") } : {}),
          ...(integration.audience ? { audience: integration.audience } : {}),
        })
      ).payload;
    } catch (e) {
      if (e instanceof joseErrors.JWKSNoMatchingKey) continue;
      throw e;
    }
    const role = payload.role ?? "authenticated";
    if (typeof role !== "string" || !THIRD_PARTY_ROLES.has(role))
      throw new JwtRejected("a third-party token may only take the anon or authenticated role");
    return payload;
  }
  return undefined;
}

/**
 * Verifies a bearer JWT: a signing key of the project matched by `kid` (standby or in_use, with the key's own
 * algorithm), else the project's JWT secret for HS256, else (unless `thirdParty` is false: tokens that must be
 * Strata's own) a third-party integration. Throws JwtRejected.
 */
export async function verifyJwt(
  project: ProjectRuntime,
  token: string,
  { thirdParty = true }: { thirdParty?: boolean } = {},
): Promise<JWTPayload> {
  try {
    // A token that verified with the project secret is that token again: no header to decode.
    const known = verifiedWithSecret(project, token);
    if (known !== undefined) return known;
    const header = decodeProtectedHeader(token);
    const alg = header.alg ?? "none";
    if (alg !== "HS256" && !ASYMMETRIC.has(alg)) throw new JwtRejected(`unsupported algorithm ${alg}`);
    const key = header.kid ? await verifyingKey(project.platformPool, project.ref, header.kid) : undefined;
    if (key) {
      if (key.algorithm !== alg)
        throw new JwtRejected(`algorithm ${alg} does not belong to key ${header.kid}`);
      return (
        await jwtVerify(token, await keyOf(key, "verify", kekOf(project.platformPool)), {
          algorithms: [key.algorithm],
          ...REQUIRED,
        })
      ).payload;
    }
    // A kid names a key: one that is unknown (deleted, revoked, made up) verifies nothing, not even with the
    // JWT secret.
    if (alg === "HS256" && header.kid) throw new JwtRejected(`unknown signing key ${header.kid}`);
    if (alg === "HS256") return await verifyWithSecret(project, token);
    const payload = thirdParty && ASYMMETRIC.has(alg) ? await verifyThirdParty(project, token) : undefined;
    if (!payload)
      throw new JwtRejected(header.kid ? `unknown signing key ${header.kid}` : "no key to verify the JWT");
    return payload;
  } catch (e) {
    throw new JwtRejected(reason(e));
  }
}
