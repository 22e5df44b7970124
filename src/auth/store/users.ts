import type pg from "pg";
import { factorsOf, toFactor, type FactorRow } from "./factors";
import { identitiesOf, upsertEmailIdentity, upsertPhoneIdentity } from "./identities";

/** The project's users (`auth.users`): found, created, changed, and as the auth client reads them. */

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

/** What a new user with an address or number has besides it. */
export interface NewUser {
  passwordHash: string | null;
  /** Its address or number is confirmed at once. */
  confirmed: boolean;
  metadata: Record<string, unknown>;
  /** Merged into the provider fields of raw_app_meta_data. */
  appMetadata?: Record<string, unknown>;
}

/** The statement values of a NewUser, in the order both inserts take them ($2 to $5). */
const newUserValues = (user: NewUser) => [
  user.passwordHash,
  user.confirmed,
  JSON.stringify(user.metadata),
  user.appMetadata ? JSON.stringify(user.appMetadata) : null,
];

/** A new user (and its email identity). Undefined when the email is taken. */
export async function insertUser(
  db: Db,
  user: NewUser & { email: string; invited?: boolean },
): Promise<UserRow | undefined> {
  const { rows } = await db.query(
    `insert into auth.users (email, encrypted_password, email_confirmed_at, raw_user_meta_data, raw_app_meta_data,
                             invited_at)
     values ($1, $2, case when $3 then now() end, $4,
             '{"provider": "email", "providers": ["email"]}'::jsonb || coalesce($5, '{}')::jsonb,
             case when $6 then now() end)
     on conflict (email) where is_sso_user = false do nothing returning *`,
    [user.email, ...newUserValues(user), Boolean(user.invited)],
  );
  const row: UserRow | undefined = rows[0];
  if (row) await upsertEmailIdentity(db, row);
  return row;
}

/** A new phone user (and its phone identity). Undefined when the number is taken. */
export async function insertPhoneUser(
  db: Db,
  user: NewUser & { phone: string },
): Promise<UserRow | undefined> {
  const { rows } = await db.query(
    `insert into auth.users (phone, encrypted_password, phone_confirmed_at, raw_user_meta_data, raw_app_meta_data)
     values ($1, $2, case when $3 then now() end, $4,
             '{"provider": "phone", "providers": ["phone"]}'::jsonb || coalesce($5, '{}')::jsonb)
     on conflict (phone) do nothing returning *`,
    [user.phone, ...newUserValues(user)],
  );
  const row: UserRow | undefined = rows[0];
  if (row) await upsertPhoneIdentity(db, row);
  return row;
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

/**
 * The unconfirmed user of a number (`phone`), or the user changing to it (`phone_change`), locked for the
 * transaction; SSO users sign in only through their provider.
 */
export async function lockUserByPhone(
  db: Db,
  column: "phone" | "phone_change",
  phone: string,
): Promise<UserRow | undefined> {
  return (
    await db.query(`select * from auth.users where ${column} = $1 and not is_sso_user for update`, [phone])
  ).rows[0];
}

/** The user changing its address to `email`, locked for the transaction. */
export async function lockUserByEmailChange(db: Db, email: string): Promise<UserRow | undefined> {
  return (await db.query("select * from auth.users where email_change = $1 for update", [email])).rows[0];
}

/** The user with a pending change to (or, as the platform, from) `phone`, locked for the transaction. */
export async function lockUserByPhoneChange(db: Db, phone: string): Promise<UserRow | undefined> {
  const { rows } = await db.query(
    `select * from auth.users where (phone_change = $1 or phone = $1) and phone_change is not null
        and phone_change <> '' and not is_sso_user order by (phone_change = $1) desc limit 1 for update`,
    [phone],
  );
  return rows[0];
}

/** The users holding `hash` in one of the token `columns` (the caller's constants), locked. */
export async function lockUsersByTokenHash(db: Db, columns: string[], hash: string): Promise<UserRow[]> {
  const where = columns.map((c) => `${c} = $1`).join(" or ");
  return (await db.query(`select * from auth.users where ${where} for update`, [hash])).rows;
}

/** The users whose address (or pending new address) is `email`, locked; SSO users are not among them. */
export async function lockUsersByAddress(db: Db, email: string): Promise<UserRow[]> {
  return (
    await db.query(
      "select * from auth.users where (email = $1 or email_change = $1) and not is_sso_user for update",
      [email],
    )
  ).rows;
}

export async function countUsers(db: Db): Promise<number> {
  return Number((await db.query("select count(*)::int as n from auth.users")).rows[0].n);
}

/** A page of users in the order they were created. */
export async function usersPage(db: Db, limit: number, offset: number): Promise<UserRow[]> {
  return (
    await db.query("select * from auth.users order by created_at, id limit $1 offset $2", [limit, offset])
  ).rows;
}

export async function deleteUser(db: Db, id: string): Promise<void> {
  await db.query("delete from auth.users where id = $1", [id]);
}

/**
 * A new user of an external provider (OAuth, or SSO: an `is_sso_user` that signs in only through it) with
 * the provider's claims as its metadata.
 */
export async function insertExternalUser(
  db: Db,
  user: {
    email: string | null;
    confirmed: boolean;
    sso: boolean;
    provider: string;
    metadata: Record<string, unknown>;
  },
): Promise<UserRow> {
  const { rows } = await db.query(
    `insert into auth.users (email, email_confirmed_at, is_sso_user, raw_app_meta_data, raw_user_meta_data)
     values ($1, case when $2 then now() end, $3, $4, $5) returning *`,
    [
      user.email,
      user.confirmed,
      user.sso,
      JSON.stringify({ provider: user.provider, providers: [user.provider] }),
      JSON.stringify(user.metadata),
    ],
  );
  return rows[0];
}

/** An anonymous user who confirmed an address becomes an email user. */
export async function makeEmailUser(db: Db, id: string): Promise<void> {
  await db.query(
    `update auth.users set raw_app_meta_data = raw_app_meta_data ||
       '{"provider": "email", "providers": ["email"]}'::jsonb where id = $1`,
    [id],
  );
}

/** An SSO user signing in again: its provider's claims and address replace the old ones, confirmed. */
export async function refreshSsoUser(
  db: Db,
  id: string,
  email: string,
  metadata: Record<string, unknown>,
): Promise<void> {
  await db.query(
    `update auth.users set raw_user_meta_data = raw_user_meta_data || $2::jsonb, email = $3,
            email_confirmed_at = coalesce(email_confirmed_at, now()), updated_at = now()
      where id = $1`,
    [id, JSON.stringify(metadata), email],
  );
}

/** The users (but SSO ones) whose address is one of `emails` (lower case), held for the transaction. */
export async function lockUsersWithEmails(db: Db, emails: string[]): Promise<UserRow[]> {
  const { rows } = await db.query(
    "select * from auth.users where email = any($1::text[]) and is_sso_user = false for update",
    [emails],
  );
  return rows;
}
