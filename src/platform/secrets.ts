import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

/**
 * A project's secrets (its edge functions' environment), sealed under the project's root key (itself sealed
 * by the key-encryption key, kek.ts): AES-256-GCM under a key derived from the root key, stored as
 * `iv.tag.ciphertext` in base64url parts. The Management API writes them, the functions gate opens them.
 */

const keyOf = (rootKey: string) => createHash("sha256").update(rootKey, "utf8").digest();

export function encryptSecret(rootKey: string, value: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", keyOf(rootKey), iv);
  const data = Buffer.concat([cipher.update(value, "utf8"), cipher.final()]);
  return [iv, cipher.getAuthTag(), data].map((b) => b.toString("base64url")).join(".");
}

/** Throws when `rootKey` is not the key the value was encrypted under. */
export function decryptSecret(rootKey: string, stored: string): string {
  const [iv, tag, data] = stored.split(".").map((p) => Buffer.from(p, "base64url"));
  const decipher = createDecipheriv("aes-256-gcm", keyOf(rootKey), iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(data), decipher.final()]).toString("utf8");
}

/** What lists show instead of a value, as the platform does: its SHA-256 digest. */
export const digestOf = (value: string) => createHash("sha256").update(value, "utf8").digest("hex");

export const newRootKey = () => randomBytes(32).toString("hex");
