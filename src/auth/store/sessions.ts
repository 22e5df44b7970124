import { randomBytes } from "node:crypto";
import type pg from "pg";
import { withAdminTransaction } from "../../db/transaction";
import { sha256 } from "../../platform/ids";

/** Sessions of the project's users, their refresh tokens and how they were authenticated (amr). */

type Db = pg.Pool | pg.PoolClient;

export interface AmrEntry {
  method: string;
  timestamp: number;
}

/** A new session of `userId` with its first refresh token; records how it was authenticated. */
export async function startSession(
  db: Db,
  userId: string,
  method: string,
): Promise<{ sessionId: string; refreshToken: string }> {
  const { rows } = await db.query(
    `with s as (insert into auth.sessions (user_id, aal) values ($1, 'aal1') returning id),
          u as (update auth.users set last_sign_in_at = now() where id = $1),
          a as (insert into auth.mfa_amr_claims (session_id, authentication_method) select id, $2 from s)
     select id from s`,
    [userId, method],
  );
  const sessionId = rows[0].id;
  await db.query(
    "update auth.identities set last_sign_in_at = now() where user_id = $1 and provider in ('email', 'phone')",
    [userId],
  );
  return { sessionId, refreshToken: await addRefreshToken(db, sessionId, userId, null) };
}

/** Raises a session to aal2 after a verified factor, adding the method to its amr. */
export async function elevateSession(db: Db, sessionId: string, factorId: string, method: string) {
  await db.query(`update auth.sessions set aal = 'aal2', factor_id = $2, updated_at = now() where id = $1`, [
    sessionId,
    factorId,
  ]);
  await db.query(
    `insert into auth.mfa_amr_claims (session_id, authentication_method) values ($1, $2)
     on conflict (session_id, authentication_method) do update set updated_at = now()`,
    [sessionId, method],
  );
}

/** A session's assurance level and amr (newest first), as the JWT carries them. */
export async function sessionAssurance(
  db: Db,
  sessionId: string,
): Promise<{ aal: string; amr: AmrEntry[] } | undefined> {
  const { rows } = await db.query(
    `select s.aal::text as aal,
            coalesce((select jsonb_agg(jsonb_build_object('method', c.authentication_method,
                                        'timestamp', extract(epoch from c.updated_at)::bigint)
                                       order by c.updated_at desc)
                        from auth.mfa_amr_claims c where c.session_id = s.id), '[]') as amr
       from auth.sessions s where s.id::text = $1`,
    [sessionId],
  );
  return rows[0];
}

export async function addRefreshToken(
  db: Db,
  sessionId: string,
  userId: string,
  parent: string | null,
): Promise<string> {
  const token = randomBytes(24).toString("base64url");
  await db.query(
    "insert into auth.refresh_tokens (token_hash, session_id, user_id, parent) values ($1, $2, $3, $4)",
    [sha256(token), sessionId, userId, parent],
  );
  return token;
}

export type RefreshOutcome =
  | { kind: "ok"; sessionId: string; userId: string; refreshToken: string }
  | { kind: "not_found" }
  | { kind: "reused" }
  | { kind: "expired"; message: string };

/** Session limits of the auth config (seconds, 0 = off) checked on every refresh, as the platform does. */
export interface SessionLimits {
  timeboxSeconds: number;
  inactivitySeconds: number;
  singlePerUser: boolean;
  /**
   * sessions_tags: with single-per-user, only sessions of the same tag compete. A session's tag counts when
   * it is one of these, else it counts as the first (the platform's Session.DetermineTag); none: one group.
   */
  tags?: string[];
}

/** The tag a session counts as under `$tags` (a text[] parameter), as SQL on the session alias `alias`. */
const tagOf = (alias: string, tags: string) =>
  `(case when ${alias}.tag is null or ${alias}.tag = '' or not ${alias}.tag = any(${tags}) then (${tags})[1]
         else ${alias}.tag end)`;

// When a session was last active: its last refresh, else the later of its start and the token's last change.
const LAST_ACTIVE = `coalesce(s.refreshed_at::timestamptz, greatest(s.created_at, rt.updated_at))`;

/**
 * Whether the user has a valid session (within the limits) more recently active than the one of `row`:
 * with sessions_single_per_user only the user's latest session may be refreshed. The user's row is locked
 * so that two sessions refreshing at once are decided one after the other.
 */
async function newerSessionOf(
  client: pg.PoolClient,
  row: { session_id: string; user_id: string; last_active: Date },
  limits: SessionLimits,
): Promise<boolean> {
  await client.query("select 1 from auth.users where id = $1 for update", [row.user_id]);
  const { rows } = await client.query(
    `select 1 from auth.sessions s
      where s.user_id = $1 and s.id <> $2
        and coalesce(s.refreshed_at::timestamptz, s.created_at) > $3
        and ($4::float8 = 0 or s.created_at + make_interval(secs => $4::float8) >= now())
        and ($5::float8 = 0
             or coalesce(s.refreshed_at::timestamptz, s.created_at) + make_interval(secs => $5::float8) >= now())
        and (cardinality($6::text[]) = 0
             or ${tagOf("s", "$6::text[]")} = (select ${tagOf("c", "$6::text[]")} from auth.sessions c where c.id = $2))
      limit 1`,
    [
      row.user_id,
      row.session_id,
      row.last_active,
      limits.timeboxSeconds,
      limits.inactivitySeconds,
      limits.tags ?? [],
    ],
  );
  return rows.length > 0;
}

/**
 * Exchanges a refresh token. With rotation, the token is revoked and a new one issued; a revoked token
 * presented again within `reuseIntervalSeconds` of its rotation gets a fresh one (a client's retry), later
 * it counts as reuse and ends the whole session (the token family).
 */
export async function refreshSession(
  pool: pg.Pool,
  token: string,
  options: { rotate: boolean; reuseIntervalSeconds: number } & SessionLimits,
): Promise<RefreshOutcome> {
  return withAdminTransaction(pool, async (client) => {
    const { rows } = await client.query(
      `select rt.id, rt.session_id, rt.user_id, rt.revoked, extract(epoch from now() - rt.updated_at) as age,
              extract(epoch from now() - s.created_at) as session_age, s.not_after < now() as past_not_after,
              extract(epoch from now() - ${LAST_ACTIVE}) as idle, ${LAST_ACTIVE} as last_active
         from auth.refresh_tokens rt join auth.sessions s on s.id = rt.session_id
        where rt.token_hash = $1 for update of rt`,
      [sha256(token)],
    );
    const row = rows[0];
    let outcome: RefreshOutcome;
    if (!row) outcome = { kind: "not_found" };
    // A session's own end (an SSO provider's SessionNotOnOrAfter) holds whatever the config says.
    else if (row.past_not_after === true) {
      outcome = { kind: "expired", message: "Invalid Refresh Token: Session Expired" };
    } else if (options.timeboxSeconds > 0 && Number(row.session_age) > options.timeboxSeconds) {
      outcome = { kind: "expired", message: "Invalid Refresh Token: Session Expired" };
    } else if (options.inactivitySeconds > 0 && Number(row.idle) > options.inactivitySeconds) {
      outcome = { kind: "expired", message: "Invalid Refresh Token: Session Expired (Inactivity)" };
    } else if (options.singlePerUser && (await newerSessionOf(client, row, options))) {
      outcome = {
        kind: "expired",
        message: "Invalid Refresh Token: Session Expired (Revoked by Newer Login)",
      };
    } else if (row.revoked && Number(row.age) >= options.reuseIntervalSeconds) {
      await client.query("delete from auth.sessions where id = $1", [row.session_id]);
      outcome = { kind: "reused" };
    } else if (!options.rotate && !row.revoked) {
      await client.query("update auth.sessions set refreshed_at = now(), updated_at = now() where id = $1", [
        row.session_id,
      ]);
      outcome = { kind: "ok", sessionId: row.session_id, userId: row.user_id, refreshToken: token };
    } else {
      if (!row.revoked) {
        await client.query(
          "update auth.refresh_tokens set revoked = true, updated_at = now() where id = $1",
          [row.id],
        );
      }
      const next = await addRefreshToken(client, row.session_id, row.user_id, sha256(token));
      await client.query("update auth.sessions set refreshed_at = now(), updated_at = now() where id = $1", [
        row.session_id,
      ]);
      outcome = { kind: "ok", sessionId: row.session_id, userId: row.user_id, refreshToken: next };
    }
    return outcome;
  });
}

/** Ends sessions: `local` the given one, `others` all but it, `global` all of the user's. */
export async function endSessions(
  db: Db,
  userId: string,
  sessionId: string | null,
  scope: "global" | "local" | "others",
): Promise<void> {
  if (scope === "global" || !sessionId) {
    await db.query("delete from auth.sessions where user_id = $1", [userId]);
    return;
  }
  await db.query("delete from auth.sessions where user_id = $1 and (id = $2) = $3", [
    userId,
    sessionId,
    scope === "local",
  ]);
}

/** Ends the user's sessions signed in through the SSO provider `providerId` (its single logout). */
export async function endProviderSessions(db: Db, userId: string, providerId: string): Promise<number> {
  const ended = await db.query("delete from auth.sessions where user_id = $1 and sso_provider_id = $2", [
    userId,
    providerId,
  ]);
  return ended.rowCount ?? 0;
}

/** The SSO provider a session was signed in through, if any. */
export async function ssoProviderOfSession(db: Db, sessionId: string): Promise<string | undefined> {
  const { rows } = await db.query("select sso_provider_id from auth.sessions where id::text = $1", [
    sessionId,
  ]);
  return rows[0]?.sso_provider_id ?? undefined;
}

/** Whether a session still exists (a signed-out session's tokens stop opening /auth/v1/user). */
export async function sessionExists(db: Db, sessionId: string): Promise<boolean> {
  return (await db.query("select 1 from auth.sessions where id::text = $1", [sessionId])).rowCount === 1;
}

/** Seconds since a session started; undefined when there is no such session. */
export async function sessionAgeSeconds(db: Db, sessionId: string | null): Promise<number | undefined> {
  const { rows } = await db.query(
    "select extract(epoch from now() - created_at) as age from auth.sessions where id::text = $1",
    [sessionId],
  );
  return rows[0] ? Number(rows[0].age) : undefined;
}

/** A session of an SSO provider: it ends when the provider's assertion said (SessionNotOnOrAfter). */
export async function bindSsoSession(
  db: Db,
  sessionId: string,
  providerId: string,
  notAfter: Date | null,
): Promise<void> {
  await db.query("update auth.sessions set not_after = $2, sso_provider_id = $3 where id = $1", [
    sessionId,
    notAfter,
    providerId,
  ]);
}
