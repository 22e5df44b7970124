import { randomBytes } from "node:crypto";
import type pg from "pg";
import { sha256 } from "../platform/ids";
import { withAdminTransaction } from "../db/transaction";

type Db = pg.Pool | pg.PoolClient;

export interface UserRow {
  id: string;
  aud: string;
  role: string;
  email: string | null;
  encrypted_password: string | null;
  is_anonymous: boolean;
  email_confirmed_at: Date | null;
  confirmed_at: Date | null;
  last_sign_in_at: Date | null;
  raw_app_meta_data: Record<string, unknown>;
  raw_user_meta_data: Record<string, unknown>;
  confirmation_token: string | null;
  confirmation_sent_at: Date | null;
  recovery_token: string | null;
  recovery_sent_at: Date | null;
  email_change: string | null;
  email_change_token_new: string | null;
  email_change_token_current: string | null;
  email_change_sent_at: Date | null;
  email_change_confirm_status: number;
  reauthentication_token: string | null;
  reauthentication_sent_at: Date | null;
  invited_at: Date | null;
  banned_until: Date | null;
  phone: string | null;
  phone_confirmed_at: Date | null;
  phone_change: string | null;
  phone_change_token: string | null;
  phone_change_sent_at: Date | null;
  is_sso_user: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface FactorRow {
  id: string;
  user_id: string;
  friendly_name: string | null;
  factor_type: string;
  status: string;
  secret: string;
  phone: string | null;
  created_at: Date;
  updated_at: Date;
  last_challenged_at: Date | null;
}

export function toFactor(f: FactorRow) {
  return {
    id: f.id,
    friendly_name: f.friendly_name ?? "",
    factor_type: f.factor_type,
    status: f.status,
    ...(f.factor_type === "phone" ? { phone: f.phone ?? "" } : {}),
    created_at: f.created_at,
    updated_at: f.updated_at,
    last_challenged_at: f.last_challenged_at ?? undefined,
  };
}

/** A user as the auth client reads it, with its identities and (when it has any) MFA factors. */
export function toUser(row: UserRow, identities: Record<string, unknown>[] = [], factors: FactorRow[] = []) {
  return {
    id: row.id,
    aud: row.aud,
    role: row.role,
    email: row.email ?? "",
    email_confirmed_at: row.email_confirmed_at ?? undefined,
    phone: row.phone ?? "",
    phone_confirmed_at: row.phone_confirmed_at ?? undefined,
    new_phone: row.phone_change || undefined,
    phone_change_sent_at: row.phone_change_sent_at ?? undefined,
    confirmation_sent_at: row.confirmation_sent_at ?? undefined,
    confirmed_at: row.confirmed_at ?? undefined,
    recovery_sent_at: row.recovery_sent_at ?? undefined,
    new_email: row.email_change || undefined,
    email_change_sent_at: row.email_change_sent_at ?? undefined,
    invited_at: row.invited_at ?? undefined,
    banned_until: row.banned_until ?? undefined,
    last_sign_in_at: row.last_sign_in_at ?? undefined,
    app_metadata: row.raw_app_meta_data,
    user_metadata: row.raw_user_meta_data,
    identities,
    factors: factors.length ? factors.map(toFactor) : undefined,
    created_at: row.created_at,
    updated_at: row.updated_at,
    is_anonymous: row.is_anonymous,
  };
}

export type ApiUser = ReturnType<typeof toUser>;

async function identitiesOf(db: Db, userId: string) {
  const { rows } = await db.query(
    `select identity_id, id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at, email
       from (select id::text as identity_id, provider_id as id, user_id, identity_data, provider,
                    last_sign_in_at, created_at, updated_at, email
               from auth.identities where user_id = $1 order by created_at) i`,
    [userId],
  );
  return rows;
}

export async function factorsOf(db: Db, userId: string): Promise<FactorRow[]> {
  return (await db.query("select * from auth.mfa_factors where user_id = $1 order by created_at", [userId]))
    .rows;
}

/** The client's view of a user row: with identities and factors. */
export async function apiUser(db: Db, row: UserRow): Promise<ApiUser> {
  return toUser(row, await identitiesOf(db, row.id), await factorsOf(db, row.id));
}

/** The user of an address; SSO users (who may share one) sign in only through their provider. */
export async function userByEmail(db: Db, email: string): Promise<UserRow | undefined> {
  return (await db.query("select * from auth.users where email = $1 and not is_sso_user", [email])).rows[0];
}

/** The user of a phone number (E.164 digits); SSO users sign in only through their provider. */
export async function userByPhone(db: Db, phone: string): Promise<UserRow | undefined> {
  return (await db.query("select * from auth.users where phone = $1 and not is_sso_user", [phone])).rows[0];
}

export async function userById(db: Db, id: string): Promise<UserRow | undefined> {
  return (await db.query("select * from auth.users where id::text = $1", [id])).rows[0];
}

/** A new user (and its email identity). Undefined when the email is taken. */
export async function insertUser(
  db: Db,
  user: {
    email: string;
    passwordHash: string | null;
    confirmed: boolean;
    metadata: Record<string, unknown>;
    appMetadata?: Record<string, unknown>;
    invited?: boolean;
  },
): Promise<UserRow | undefined> {
  const { rows } = await db.query(
    `insert into auth.users (email, encrypted_password, email_confirmed_at, raw_user_meta_data, raw_app_meta_data,
                             invited_at)
     values ($1, $2, case when $3 then now() end, $4,
             '{"provider": "email", "providers": ["email"]}'::jsonb || coalesce($5, '{}')::jsonb,
             case when $6 then now() end)
     on conflict (email) where is_sso_user = false do nothing returning *`,
    [
      user.email,
      user.passwordHash,
      user.confirmed,
      JSON.stringify(user.metadata),
      user.appMetadata ? JSON.stringify(user.appMetadata) : null,
      Boolean(user.invited),
    ],
  );
  const row: UserRow | undefined = rows[0];
  if (row) await upsertEmailIdentity(db, row);
  return row;
}

/** The user's identity of an own provider (`email`, `phone`): its id is the user's, its data replaced. */
async function upsertOwnIdentity(
  db: Db,
  userId: string,
  provider: "email" | "phone",
  data: Record<string, unknown>,
): Promise<void> {
  await db.query(
    `insert into auth.identities (provider_id, user_id, identity_data, provider)
     values ($1::text, $1::text::uuid, $2, $3)
     on conflict (provider_id, provider) do update set identity_data = excluded.identity_data, updated_at = now()`,
    [userId, JSON.stringify({ sub: userId, ...data }), provider],
  );
}

/** The user's `email` identity, kept in step with its address and confirmation. */
export async function upsertEmailIdentity(db: Db, row: UserRow): Promise<void> {
  if (!row.email) return;
  await upsertOwnIdentity(db, row.id, "email", {
    email: row.email,
    email_verified: row.email_confirmed_at !== null,
    phone_verified: false,
  });
}

/** A new phone user (and its phone identity). Undefined when the number is taken. */
export async function insertPhoneUser(
  db: Db,
  user: {
    phone: string;
    passwordHash: string | null;
    confirmed: boolean;
    metadata: Record<string, unknown>;
    appMetadata?: Record<string, unknown>;
  },
): Promise<UserRow | undefined> {
  const { rows } = await db.query(
    `insert into auth.users (phone, encrypted_password, phone_confirmed_at, raw_user_meta_data, raw_app_meta_data)
     values ($1, $2, case when $3 then now() end, $4,
             '{"provider": "phone", "providers": ["phone"]}'::jsonb || coalesce($5, '{}')::jsonb)
     on conflict (phone) do nothing returning *`,
    [
      user.phone,
      user.passwordHash,
      user.confirmed,
      JSON.stringify(user.metadata),
      user.appMetadata ? JSON.stringify(user.appMetadata) : null,
    ],
  );
  const row: UserRow | undefined = rows[0];
  if (row) await upsertPhoneIdentity(db, row);
  return row;
}

/** The user's `phone` identity, kept in step with its number and confirmation. */
export async function upsertPhoneIdentity(db: Db, row: UserRow): Promise<void> {
  if (!row.phone) return;
  await upsertOwnIdentity(db, row.id, "phone", {
    phone: row.phone,
    email_verified: false,
    phone_verified: row.phone_confirmed_at !== null,
  });
}

/**
 * `app_metadata.providers` as the user's identities name them (the platform's UpdateAppMetaDataProviders);
 * an anonymous user who linked a number or address takes that provider.
 */
export async function syncProviders(db: Db, userId: string): Promise<void> {
  await db.query(
    `update auth.users u
        set raw_app_meta_data = u.raw_app_meta_data || jsonb_build_object('providers', p.providers)
              || case when u.raw_app_meta_data->>'provider' = 'anonymous' or u.raw_app_meta_data->>'provider' is null
                      then jsonb_build_object('provider', p.providers->>0) else '{}'::jsonb end
       from (select coalesce(jsonb_agg(distinct provider), '[]'::jsonb) as providers
               from auth.identities where user_id = $1) p
      where u.id = $1 and jsonb_array_length(p.providers) > 0`,
    [userId],
  );
}

export async function insertAnonymousUser(db: Db, metadata: Record<string, unknown>): Promise<UserRow> {
  const { rows } = await db.query(
    `insert into auth.users (is_anonymous, raw_app_meta_data, raw_user_meta_data)
     values (true, '{"provider": "anonymous", "providers": ["anonymous"]}', $1) returning *`,
    [JSON.stringify(metadata)],
  );
  return rows[0];
}

/** Sets columns of a user (names are the caller's constants, never input) and returns the row. */
export async function setUser(db: Db, id: string, columns: Record<string, unknown>): Promise<UserRow> {
  const names = Object.keys(columns);
  const sets = names.map((n, i) => `${n} = $${i + 2}`);
  const { rows } = await db.query(
    `update auth.users set ${[...sets, "updated_at = now()"].join(", ")} where id = $1 returning *`,
    [id, ...names.map((n) => columns[n])],
  );
  return rows[0];
}

/** Merges metadata: keys set to null are removed, as the platform does. */
export async function mergeUserMetadata(
  db: Db,
  id: string,
  column: "raw_user_meta_data" | "raw_app_meta_data",
  changes: Record<string, unknown>,
): Promise<void> {
  await db.query(
    `update auth.users
        set ${column} = jsonb_strip_nulls(${column} || $2::jsonb) , updated_at = now()
      where id = $1`,
    [id, JSON.stringify(changes)],
  );
}

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

/** Whether a session still exists (a signed-out session's tokens stop opening /auth/v1/user). */
export async function sessionExists(db: Db, sessionId: string): Promise<boolean> {
  return (await db.query("select 1 from auth.sessions where id::text = $1", [sessionId])).rowCount === 1;
}
