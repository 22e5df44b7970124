import { decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from "jose";
import type { ProjectRuntime } from "../projects/runtime";
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

async function verifyWithSecret(project: ProjectRuntime, token: string): Promise<JWTPayload> {
  const secret = new TextEncoder().encode(project.record.jwtSecret);
  return (await jwtVerify(token, secret, { algorithms: ["HS256"], ...REQUIRED })).payload;
}

/** Tries the project's third-party integrations; the first whose keys verify the token wins. */
async function verifyThirdParty(project: ProjectRuntime, token: string): Promise<JWTPayload | undefined> {
  for (const integration of await thirdPartyIntegrations(project.platformPool, project.ref)) {
    try {
      const keys = await keySetOf(integration);
      return (await jwtVerify(token, keys, { algorithms: [...ASYMMETRIC], ...REQUIRED })).payload;
    } catch (e) {
      if (!(e instanceof joseErrors.JWKSNoMatchingKey)) throw e;
    }
  }
  return undefined;
}

/**
 * Verifies a bearer JWT: a signing key of the project matched by `kid` (standby or in_use, with the key's own
 * algorithm), else the project's JWT secret for HS256, else a third-party integration. Throws JwtRejected.
 */
export async function verifyJwt(project: ProjectRuntime, token: string): Promise<JWTPayload> {
  try {
    const header = decodeProtectedHeader(token);
    const alg = header.alg ?? "none";
    if (alg !== "HS256" && !ASYMMETRIC.has(alg)) throw new JwtRejected(`unsupported algorithm ${alg}`);
    const key = header.kid ? await verifyingKey(project.platformPool, project.ref, header.kid) : undefined;
    if (key) {
      if (key.algorithm !== alg)
        throw new JwtRejected(`algorithm ${alg} does not belong to key ${header.kid}`);
      return (
        await jwtVerify(token, await keyOf(key, "verify"), { algorithms: [key.algorithm], ...REQUIRED })
      ).payload;
    }
    // A kid names a key: one that is unknown (deleted, revoked, made up) verifies nothing, not even with the
    // JWT secret.
    if (alg === "HS256" && header.kid) throw new JwtRejected(`unknown signing key ${header.kid}`);
    if (alg === "HS256") return await verifyWithSecret(project, token);
    const payload = ASYMMETRIC.has(alg) ? await verifyThirdParty(project, token) : undefined;
    if (!payload)
      throw new JwtRejected(header.kid ? `unknown signing key ${header.kid}` : "no key to verify the JWT");
    return payload;
  } catch (e) {
    throw new JwtRejected(reason(e));
  }
}
