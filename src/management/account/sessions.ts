import type pg from "pg";
import { randomSecret, sha256 } from "../../platform/ids";
import type { Principal } from "../principal";
import { firstRow, oneRow } from "../rows";

/**
 * Sign-in sessions of the installation's users: an opaque token (answered once, kept as its SHA-256 hash)
 * that acts on the Management API as a personal access token of its user until it expires or is ended.
 */

/** Session tokens are told apart from access tokens (`sbp_...`) by their prefix. */
export const SESSION_PREFIX = "strata_session_";
/** How long a session lasts from its sign-in. */
export const SESSION_SECONDS = 7 * 24 * 3600;

export interface NewSession {
  token: string;
  expiresAt: Date;
}

/** Starts a session for `userId` (expired sessions are cleared on the way). */
export async function createSession(db: pg.Pool, userId: string): Promise<NewSession> {
  await db.query("delete from platform.user_sessions where expires_at <= now()");
  const token = SESSION_PREFIX + randomSecret(32);
  const row = await oneRow<{ expires_at: Date }>(
    db,
    `insert into platform.user_sessions (user_id, token_hash, expires_at)
     values ($1, $2, now() + make_interval(secs => $3)) returning expires_at`,
    [userId, sha256(token), SESSION_SECONDS],
  );
  return { token, expiresAt: row.expires_at };
}

/** The caller a live session token stands for: its user, with all of the user's privileges. */
export async function sessionCaller(db: pg.Pool, token: string): Promise<Principal | undefined> {
  const row = await firstRow(
    db,
    `update platform.user_sessions s set last_used_at = now() from platform.users u
      where s.token_hash = $1 and s.expires_at > now() and u.id = s.user_id
      returning s.id, s.user_id, u.is_installation_admin`,
    [sha256(token)],
  );
  if (!row) return undefined;
  return {
    userId: row.user_id,
    tokenId: row.id,
    via: "session",
    permissions: null,
    scopes: null,
    oauthAppId: null,
    organizationId: null,
    installationAdmin: row.is_installation_admin,
  };
}

/** Ends a session (sign-out). */
export async function endSession(db: pg.Pool, sessionId: string): Promise<void> {
  await db.query("delete from platform.user_sessions where id = $1", [sessionId]);
}
