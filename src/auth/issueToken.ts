import { SignJWT, type JWTPayload } from "jose";
import type { ProjectRuntime } from "../projects/runtime";
import { kekOf } from "../platform/kek";
import { inUseKey, keyOf } from "./signingKeys";

/**
 * Signs a token Strata issues with the project's `in_use` signing key (its id as `kid`), or with the JWT
 * secret (HS256, no kid) when no signing key is in use.
 */
export async function signProjectToken(project: ProjectRuntime, claims: JWTPayload): Promise<string> {
  const key = await inUseKey(project.platformPool, project.ref);
  if (!key) {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .sign(new TextEncoder().encode(project.record.jwtSecret));
  }
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.algorithm, typ: "JWT", kid: key.id })
    .sign(await keyOf(key, "sign", kekOf(project.platformPool)));
}
