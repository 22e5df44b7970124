import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import type pg from "pg";

/**
 * The dashboard's sessions. The cookie holds `<id>.<token sealed under the session's key>`; the control plane
 * holds the id's hash and the key (platform.studio_sessions). Neither half alone gives the token, and the
 * session ends for every node the moment its row is deleted (sign-out, expiry).
 */

export const SESSION_COOKIE = "strata_studio";
export const SESSION_SECONDS = 7 * 24 * 3600;

const COOKIE_VALUE = /^([A-Za-z0-9_-]{43})\.([A-Za-z0-9_-]{40,4096})$/;

const hashOf = (id: string) => createHash("sha256").update(id, "utf8").digest("hex");

/** Seals `token` under `key`, bound to the session id (a sealed value does not open under another id). */
function seal(key: Buffer, id: string, token: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(Buffer.from(id, "utf8"));
  const body = Buffer.concat([cipher.update(token, "utf8"), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url");
}

function open(key: Buffer, id: string, sealed: string): string | undefined {
  const raw = Buffer.from(sealed, "base64url");
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12)).setAAD(
      Buffer.from(id, "utf8"),
    );
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
  } catch {
    return undefined;
  }
}

/** Starts a session for `token` (already checked against the Management API); answers the cookie's value. */
export async function startSession(pool: pg.Pool, token: string): Promise<string> {
  const id = randomBytes(32).toString("base64url");
  const key = randomBytes(32);
  // Sessions nobody signed out of are swept as new ones start.
  await pool.query("delete from platform.studio_sessions where expires_at < now()");
  await pool.query(
    `insert into platform.studio_sessions (id_hash, token_key, expires_at)
     values ($1, $2, now() + make_interval(secs => $3))`,
    [hashOf(id), key, SESSION_SECONDS],
  );
  return `${id}.${seal(key, id, token)}`;
}

/** The token of a live session, or undefined (no such session, expired, ended, or a forged cookie). */
export async function sessionToken(pool: pg.Pool, cookie: string | undefined): Promise<string | undefined> {
  const m = cookie ? COOKIE_VALUE.exec(cookie) : null;
  if (!m) return undefined;
  const { rows } = await pool.query<{ token_key: Buffer }>(
    "select token_key from platform.studio_sessions where id_hash = $1 and expires_at > now()",
    [hashOf(m[1])],
  );
  return rows[0] && open(rows[0].token_key, m[1], m[2]);
}

/** Ends the session of `cookie` (nothing when there is none). */
export async function endSession(pool: pg.Pool, cookie: string | undefined): Promise<void> {
  const m = cookie ? COOKIE_VALUE.exec(cookie) : null;
  if (m) await pool.query("delete from platform.studio_sessions where id_hash = $1", [hashOf(m[1])]);
}

/** The value of cookie `name` in a Cookie header. */
export function cookieOf(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}
