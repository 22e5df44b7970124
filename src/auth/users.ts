import { randomBytes } from "node:crypto";
import type pg from "pg";
import { sha256 } from "../platform/ids";
import { withAdminTransaction } from "../db/transaction";

export interface UserRow {
  id: string;
  aud: string;
  role: string;
  email: string | null;
  encrypted_password: string | null;
  is_anonymous: boolean;
  email_confirmed_at: Date | null;
  last_sign_in_at: Date | null;
  raw_app_meta_data: Record<string, unknown>;
  raw_user_meta_data: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

/** A new anonymous user: signed in at once, without email or password. */
export async function insertAnonymousUser(
  pool: pg.Pool,
  metadata: Record<string, unknown>,
): Promise<UserRow> {
  const { rows } = await pool.query(
    `insert into auth.users (is_anonymous, raw_app_meta_data, raw_user_meta_data)
     values (true, '{"provider": "anonymous", "providers": ["anonymous"]}', $1) returning *`,
    [JSON.stringify(metadata)],
  );
  return rows[0];
}

/** A user as the auth client reads it. */
export function toUser(row: UserRow) {
  return {
    id: row.id,
    aud: row.aud,
    role: row.role,
    email: row.email ?? "",
    email_confirmed_at: row.email_confirmed_at,
    confirmed_at: row.email_confirmed_at,
    phone: "",
    last_sign_in_at: row.last_sign_in_at,
    app_metadata: row.raw_app_meta_data,
    user_metadata: row.raw_user_meta_data,
    identities: [],
    created_at: row.created_at,
    updated_at: row.updated_at,
    is_anonymous: row.is_anonymous,
  };
}

export async function insertUser(
  pool: pg.Pool,
  user: { email: string; passwordHash: string; confirmed: boolean; metadata: Record<string, unknown> },
): Promise<UserRow | undefined> {
  const { rows } = await pool.query(
    `insert into auth.users (email, encrypted_password, email_confirmed_at, raw_user_meta_data)
     values ($1, $2, case when $3 then now() end, $4)
     on conflict (email) do nothing returning *`,
    [user.email, user.passwordHash, user.confirmed, JSON.stringify(user.metadata)],
  );
  return rows[0];
}

export async function userByEmail(pool: pg.Pool, email: string): Promise<UserRow | undefined> {
  return (await pool.query("select * from auth.users where email = $1", [email])).rows[0];
}

export async function userById(pool: pg.Pool, id: string): Promise<UserRow | undefined> {
  return (await pool.query("select * from auth.users where id::text = $1", [id])).rows[0];
}

export async function updateUser(
  pool: pg.Pool,
  id: string,
  changes: { email?: string; passwordHash?: string; metadata?: Record<string, unknown> },
): Promise<UserRow | undefined> {
  const { rows } = await pool.query(
    `update auth.users
        set email = coalesce($2, email),
            encrypted_password = coalesce($3, encrypted_password),
            raw_user_meta_data = raw_user_meta_data || coalesce($4, '{}'::jsonb),
            updated_at = now()
      where id = $1 returning *`,
    [
      id,
      changes.email ?? null,
      changes.passwordHash ?? null,
      changes.metadata ? JSON.stringify(changes.metadata) : null,
    ],
  );
  return rows[0];
}

/** A new session of `userId` with its first refresh token; marks the sign-in. */
export async function startSession(
  pool: pg.Pool,
  userId: string,
): Promise<{ sessionId: string; refreshToken: string }> {
  const { rows } = await pool.query(
    `with s as (insert into auth.sessions (user_id) values ($1) returning id),
          u as (update auth.users set last_sign_in_at = now() where id = $1)
     select id from s`,
    [userId],
  );
  const sessionId = rows[0].id;
  return { sessionId, refreshToken: await addRefreshToken(pool, sessionId, userId) };
}

async function addRefreshToken(
  pool: pg.Pool | pg.PoolClient,
  sessionId: string,
  userId: string,
): Promise<string> {
  const token = randomBytes(24).toString("base64url");
  await pool.query("insert into auth.refresh_tokens (token_hash, session_id, user_id) values ($1, $2, $3)", [
    sha256(token),
    sessionId,
    userId,
  ]);
  return token;
}

export type RefreshOutcome =
  | { kind: "ok"; sessionId: string; userId: string; refreshToken: string }
  | { kind: "not_found" }
  | { kind: "reused" };

/**
 * Exchanges a refresh token. With rotation, the token is revoked and a new one issued; a revoked token
 * presented again within `reuseIntervalSeconds` of its rotation gets a fresh one (a client's retry), later
 * it counts as reuse and ends the whole session.
 */
export async function refreshSession(
  pool: pg.Pool,
  token: string,
  options: { rotate: boolean; reuseIntervalSeconds: number },
): Promise<RefreshOutcome> {
  return withAdminTransaction(pool, async (client) => {
    const { rows } = await client.query(
      `select id, session_id, user_id, revoked, extract(epoch from now() - updated_at) as age
         from auth.refresh_tokens where token_hash = $1 for update`,
      [sha256(token)],
    );
    const row = rows[0];
    let outcome: RefreshOutcome;
    if (!row) outcome = { kind: "not_found" };
    else if (row.revoked && Number(row.age) > options.reuseIntervalSeconds) {
      await client.query("delete from auth.sessions where id = $1", [row.session_id]);
      outcome = { kind: "reused" };
    } else if (!options.rotate && !row.revoked) {
      outcome = { kind: "ok", sessionId: row.session_id, userId: row.user_id, refreshToken: token };
    } else {
      if (!row.revoked) {
        await client.query(
          "update auth.refresh_tokens set revoked = true, updated_at = now() where id = $1",
          [row.id],
        );
      }
      const next = await addRefreshToken(client, row.session_id, row.user_id);
      outcome = { kind: "ok", sessionId: row.session_id, userId: row.user_id, refreshToken: next };
    }
    return outcome;
  });
}

/** Ends sessions: `local` the given one, `others` all but it, `global` all of the user's. */
export async function endSessions(
  pool: pg.Pool,
  userId: string,
  sessionId: string,
  scope: "global" | "local" | "others",
): Promise<void> {
  if (scope === "global") {
    await pool.query("delete from auth.sessions where user_id = $1", [userId]);
    return;
  }
  await pool.query("delete from auth.sessions where user_id = $1 and (id = $2) = $3", [
    userId,
    sessionId,
    scope === "local",
  ]);
}

/** Whether a session still exists (a signed-out session's tokens stop opening /auth/v1/user). */
export async function sessionExists(pool: pg.Pool, sessionId: string): Promise<boolean> {
  return (await pool.query("select 1 from auth.sessions where id::text = $1", [sessionId])).rowCount === 1;
}
