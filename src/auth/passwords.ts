import { scrypt, timingSafeEqual } from "node:crypto";
import bcrypt from "bcryptjs";

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
