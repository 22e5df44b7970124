import { SignJWT } from "jose";

/** The two API roles a legacy key can carry. */
export type LegacyKeyRole = "anon" | "service_role";

const TEN_YEARS = 10 * 365 * 24 * 3600;

/**
 * Mints a legacy API key: an HS256 JWT with `role`, `iss`, `iat` and `exp`, signed with the project's JWT
 * secret, as the self-hosted stack derives its keys. Deterministic for a given secret and `iat`, so the keys
 * are never stored: they are re-derived when shown.
 */
export function mintLegacyKey(jwtSecret: string, role: LegacyKeyRole, iat: number): Promise<string> {
  return new SignJWT({ role })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuer("strata")
    .setIssuedAt(iat)
    .setExpirationTime(iat + TEN_YEARS)
    .sign(new TextEncoder().encode(jwtSecret));
}
