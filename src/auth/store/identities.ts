import type pg from "pg";

/** The identities a user signs in with (`auth.identities`): its own address and number, and external providers'. */

type Db = pg.Pool | pg.PoolClient;

export async function identitiesOf(db: Db, userId: string): Promise<Record<string, unknown>[]> {
  const { rows } = await db.query(
    `select identity_id, id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at, email
       from (select id::text as identity_id, provider_id as id, user_id, identity_data, provider,
                    last_sign_in_at, created_at, updated_at, email
               from auth.identities where user_id = $1 order by created_at) i`,
    [userId],
  );
  return rows;
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
export async function upsertEmailIdentity(
  db: Db,
  user: { id: string; email: string | null; email_confirmed_at: Date | null },
): Promise<void> {
  if (!user.email) return;
  await upsertOwnIdentity(db, user.id, "email", {
    email: user.email,
    email_verified: user.email_confirmed_at !== null,
    phone_verified: false,
  });
}

/** The user's `phone` identity, kept in step with its number and confirmation. */
export async function upsertPhoneIdentity(
  db: Db,
  user: { id: string; phone: string | null; phone_confirmed_at: Date | null },
): Promise<void> {
  if (!user.phone) return;
  await upsertOwnIdentity(db, user.id, "phone", {
    phone: user.phone,
    email_verified: false,
    phone_verified: user.phone_confirmed_at !== null,
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

/** The user an external provider's subject is linked to; `lock` holds the identity for the transaction. */
export async function userIdOfIdentity(
  db: Db,
  provider: string,
  subject: string,
  options: { lock?: boolean } = {},
): Promise<string | undefined> {
  const { rows } = await db.query(
    `select user_id from auth.identities where provider = $1 and provider_id = $2${options.lock ? " for update" : ""}`,
    [provider, subject],
  );
  return rows[0]?.user_id;
}

/** Links (or refreshes) an external provider's subject to a user, as signed in now. */
export async function linkIdentity(
  db: Db,
  identity: { provider: string; subject: string; userId: string; data: Record<string, unknown> },
): Promise<void> {
  await db.query(
    `insert into auth.identities (provider_id, user_id, identity_data, provider, last_sign_in_at)
     values ($1, $2, $3, $4, now())
     on conflict (provider_id, provider) do update
       set identity_data = excluded.identity_data, last_sign_in_at = now(), updated_at = now()`,
    [identity.subject, identity.userId, JSON.stringify(identity.data), identity.provider],
  );
}

export interface IdentityRow {
  id: string;
  user_id: string;
  provider: string;
  provider_id: string;
  email: string | null;
  identity_data: Record<string, unknown>;
  created_at: Date;
}

/** A provider's identity of `subject`, held for the transaction. */
export async function lockIdentity(
  db: Db,
  provider: string,
  subject: string,
): Promise<IdentityRow | undefined> {
  const { rows } = await db.query(
    "select * from auth.identities where provider = $1 and provider_id = $2 for update",
    [provider, subject],
  );
  return rows[0];
}

/** The user's identities, oldest first. */
export async function identityRowsOf(db: Db, userId: string): Promise<IdentityRow[]> {
  const { rows } = await db.query(
    "select * from auth.identities where user_id = $1 order by created_at, id",
    [userId],
  );
  return rows;
}

/** Identities (but SSO ones) whose data names one of `emails` (lower case): automatic linking candidates. */
export async function identitiesWithEmails(db: Db, emails: string[]): Promise<IdentityRow[]> {
  const { rows } = await db.query(
    "select * from auth.identities where email = any($1::text[]) and provider not like 'sso:%'",
    [emails],
  );
  return rows;
}

/** A new identity of a user, signed in now; answers its id. */
export async function insertIdentity(
  db: Db,
  identity: { provider: string; subject: string; userId: string; data: Record<string, unknown> },
): Promise<string> {
  const { rows } = await db.query(
    `insert into auth.identities (provider_id, user_id, identity_data, provider, last_sign_in_at)
     values ($1, $2, $3, $4, now()) returning id`,
    [identity.subject, identity.userId, JSON.stringify(identity.data), identity.provider],
  );
  return rows[0].id;
}

/** An identity's data replaced, as signed in now. */
export async function refreshIdentity(db: Db, id: string, data: Record<string, unknown>): Promise<void> {
  await db.query(
    "update auth.identities set identity_data = $2, last_sign_in_at = now(), updated_at = now() where id = $1",
    [id, JSON.stringify(data)],
  );
}

export async function deleteIdentity(db: Db, id: string): Promise<void> {
  await db.query("delete from auth.identities where id = $1", [id]);
}

/** Every identity of the user but `keepId`. */
export async function deleteOtherIdentities(db: Db, userId: string, keepId: string): Promise<void> {
  await db.query("delete from auth.identities where user_id = $1 and id <> $2", [userId, keepId]);
}
