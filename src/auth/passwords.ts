import { scrypt, timingSafeEqual } from "node:crypto";
import bcrypt from "bcryptjs";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";
import { isLeakedPassword } from "./leakedPasswords";

/** bcrypt with cost 10, as the platform's auth server stores passwords (`$2a$10$...`). */
const BCRYPT_COST = 10;
/** bcrypt reads at most 72 bytes; the platform refuses longer passwords rather than cut them. */
export const MAX_PASSWORD_BYTES = 72;

export async function hashPassword(password: string): Promise<string> {
  return bcrypt.hash(password, BCRYPT_COST);
}

/** Checks a bcrypt hash, or a scrypt hash (`scrypt$N$r$p$salt$hash`) that earlier versions of Strata stored. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  if (stored.startsWith("$2")) return bcrypt.compare(password, stored);
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt") return false;
  const expected = Buffer.from(hash, "base64url");
  const key = await new Promise<Buffer>((resolve, reject) =>
    scrypt(
      password.normalize("NFKC"),
      Buffer.from(salt, "base64url"),
      expected.length,
      { N: Number(n), r: Number(r), p: Number(p), maxmem: 64 * 1024 * 1024 },
      (err, k) => (err ? reject(err) : resolve(k)),
    ),
  );
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** The reasons a password fails the project's rules (`length`, `characters`), with the platform's message. */
export function passwordWeakness(password: string, settings: AuthSettings) {
  const reasons: string[] = [];
  const messages: string[] = [];
  const min = Number(settings.password_min_length ?? 6);
  if (password.length < min) {
    reasons.push("length");
    messages.push(`Password should be at least ${min} characters.`);
  }
  const groups = String(settings.password_required_characters ?? "")
    .split(":")
    .filter(Boolean);
  if (groups.some((group) => ![...group].some((c) => password.includes(c)))) {
    reasons.push("characters");
    messages.push(`Password should contain at least one character of each: ${groups.join(", ")}.`);
  }
  if (settings.password_hibp_enabled === true && isLeakedPassword(password)) {
    reasons.push("pwned");
    messages.push("Password is known to be weak and easy to guess, please choose a different one.");
  }
  return reasons.length ? { reasons, message: messages.join(" ") } : undefined;
}

/** Refuses a password bcrypt cannot take whole, or one that fails the project's rules. */
export function checkPassword(password: string, settings: AuthSettings): void {
  if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES) {
    throw new AuthApiError(
      422,
      "validation_failed",
      `Password cannot be longer than ${MAX_PASSWORD_BYTES} characters`,
    );
  }
  const weak = passwordWeakness(password, settings);
  if (weak)
    throw new AuthApiError(422, "weak_password", weak.message, { weak_password: { reasons: weak.reasons } });
}
