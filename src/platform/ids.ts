import { createHash, randomBytes, randomInt } from "node:crypto";

/** A project ref: 20 random lowercase letters. */
export function newProjectRef(): string {
  let ref = "";
  for (let i = 0; i < 20; i++) ref += String.fromCharCode(97 + randomInt(26));
  return ref;
}

export function randomSecret(bytes = 32): string {
  return randomBytes(bytes).toString("base64url");
}

/** A personal access token in the platform's format: `sbp_` and 40 hex characters. */
export function newAccessToken(): string {
  return "sbp_" + randomBytes(20).toString("hex");
}

/** Tokens and secret keys are stored as SHA-256 hex digests only. */
export function sha256(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
