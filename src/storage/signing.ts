import { jwtVerify, SignJWT } from "jose";
import { invalidJwt, invalidSignature } from "./errors";

/**
 * Signed URLs carry a JWT signed with the project's JWT secret (HS256), as the platform's storage server
 * signs them: the `url` claim names `bucket/object`, `exp` ends it. Signed with the project's secret, a URL
 * survives a restart and dies with a rotation of the secret.
 */
export interface DownloadGrant {
  url: string;
  scope: "download";
  /** Set on a verified grant: when it ends (seconds since the epoch). */
  exp?: number;
  /** For a signed image URL: the transformations the signer chose. */
  transformations?: Record<string, unknown>;
}

export interface UploadGrant {
  url: string;
  scope: "upload";
  /** The user the upload is made for (the signer's `sub`), kept as the object's owner. */
  owner?: string;
  upsert: boolean;
}

const keyOf = (secret: string) => new TextEncoder().encode(secret);

export async function signGrant(
  secret: string,
  grant: DownloadGrant | UploadGrant,
  expiresInSeconds: number,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ ...grant })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuedAt(now)
    .setExpirationTime(now + expiresInSeconds)
    .sign(keyOf(secret));
}

/**
 * The grant of a token for `url` and `scope`; refuses a token that is altered or expired (InvalidJWT, with
 * the verifier's reason), or made for another object or use (InvalidSignature).
 */
export async function verifyGrant<G extends DownloadGrant | UploadGrant>(
  secret: string,
  token: string,
  url: string,
  scope: G["scope"],
): Promise<G> {
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(token, keyOf(secret), { algorithms: ["HS256"], requiredClaims: ["exp"] }));
  } catch (e) {
    throw invalidJwt((e as Error).message);
  }
  // A token without a scope (an older signer): one with `upsert` was made for uploads.
  const tokenScope = payload.scope ?? ("upsert" in payload ? "upload" : "download");
  if (tokenScope !== scope) throw invalidSignature(`Token is not scoped for ${scope}`);
  if (payload.url !== url) throw invalidSignature();
  return payload as unknown as G;
}
