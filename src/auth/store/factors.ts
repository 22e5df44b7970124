import type pg from "pg";
import type { CeremonySession, StoredCredential } from "../webauthn";

/** The MFA factors of the project's users and their challenges (`auth.mfa_factors`, `auth.mfa_challenges`). */

type Db = pg.Pool | pg.PoolClient;

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
  web_authn_credential: StoredCredential | null;
  web_authn_aaguid: string | null;
}

/** A factor as the auth client reads it. */
export function toFactor(f: FactorRow) {
  return {
    id: f.id,
    friendly_name: f.friendly_name ?? "",
    factor_type: f.factor_type,
    status: f.status,
    ...(f.factor_type === "phone" ? { phone: f.phone ?? "" } : {}),
    ...(f.web_authn_aaguid ? { web_authn_aaguid: f.web_authn_aaguid } : {}),
    created_at: f.created_at,
    updated_at: f.updated_at,
    last_challenged_at: f.last_challenged_at ?? undefined,
  };
}

export async function factorsOf(db: Db, userId: string): Promise<FactorRow[]> {
  return (await db.query("select * from auth.mfa_factors where user_id = $1 order by created_at", [userId]))
    .rows;
}

export async function factorOfUser(db: Db, userId: string, id: string): Promise<FactorRow | undefined> {
  return (await db.query("select * from auth.mfa_factors where id = $1 and user_id = $2", [id, userId]))
    .rows[0];
}

/** A new unverified factor: a TOTP one with its secret, a phone one with its number, or a WebAuthn one. */
export async function insertFactor(
  db: Db,
  factor: {
    userId: string;
    friendlyName: string;
    type: "totp" | "phone" | "webauthn";
    secret?: string;
    phone?: string;
  },
): Promise<FactorRow> {
  const { rows } = await db.query(
    `insert into auth.mfa_factors (user_id, friendly_name, factor_type, status, secret, phone)
     values ($1, $2, $3, 'unverified', $4, $5) returning *`,
    [factor.userId, factor.friendlyName, factor.type, factor.secret ?? null, factor.phone ?? null],
  );
  return rows[0];
}

export async function markFactorVerified(db: Db, id: string): Promise<void> {
  await db.query("update auth.mfa_factors set status = 'verified', updated_at = now() where id = $1", [id]);
}

/**
 * A WebAuthn factor's credential, saved when its registration verifies: the factor becomes verified and
 * the user's other unverified WebAuthn factors are dropped (as the platform does).
 */
export async function saveWebAuthnCredential(
  db: Db,
  factor: { id: string; userId: string },
  credential: StoredCredential,
  aaguid: string | null,
): Promise<void> {
  await db.query(
    `update auth.mfa_factors set status = 'verified', web_authn_credential = $2, web_authn_aaguid = $3,
            updated_at = now()
      where id = $1`,
    [factor.id, JSON.stringify(credential), aaguid],
  );
  await db.query(
    `delete from auth.mfa_factors
      where user_id = $1 and factor_type = 'webauthn' and status = 'unverified' and id <> $2`,
    [factor.userId, factor.id],
  );
}

/**
 * Claims a WebAuthn signature counter for the factor: false when the stored counter is not below it (an
 * authenticator that counts nothing stays at 0 and is not refused for that).
 */
export async function claimSignCount(db: Db, id: string, count: number): Promise<boolean> {
  const claimed = await db.query(
    `update auth.mfa_factors
        set web_authn_credential = jsonb_set(web_authn_credential, '{authenticator,signCount}', to_jsonb($2::bigint)),
            updated_at = now()
      where id = $1
        and ((web_authn_credential #>> '{authenticator,signCount}')::bigint < $2
             or ($2 = 0 and (web_authn_credential #>> '{authenticator,signCount}')::bigint = 0))`,
    [id, count],
  );
  return claimed.rowCount === 1;
}

/** The factor's last WebAuthn ceremony (its challenge, type and the client's response), kept for the project. */
export async function recordLastCeremony(
  db: Db,
  id: string,
  last: { challenge: { id: string }; type: string; credential_response: unknown },
): Promise<void> {
  await db.query("update auth.mfa_factors set last_webauthn_challenge_data = $2 where id = $1", [
    id,
    JSON.stringify(last),
  ]);
}

/** Claims a TOTP time step for the factor: false when that step (or a later one) was used already. */
export async function claimTotpStep(db: Db, id: string, step: number): Promise<boolean> {
  const claimed = await db.query(
    `update auth.mfa_factors set last_totp_step = $2
      where id = $1 and (last_totp_step is null or last_totp_step < $2)`,
    [id, step],
  );
  return claimed.rowCount === 1;
}

export async function deleteFactors(db: Db, ids: string[]): Promise<void> {
  await db.query("delete from auth.mfa_factors where id = any($1::uuid[])", [ids]);
}

/** Deletes a factor of the user; undefined when the user has no such factor. */
export async function deleteFactorOfUser(db: Db, userId: string, id: string): Promise<FactorRow | undefined> {
  const { rows } = await db.query("delete from auth.mfa_factors where id = $1 and user_id = $2 returning *", [
    id,
    userId,
  ]);
  return rows[0];
}

/**
 * A new challenge of a factor from `ip` (with the hash of the code sent, for a phone factor), which expires
 * `seconds` after it was made; the factor records when it was last challenged.
 */
export async function insertChallenge(
  db: Db,
  challenge: {
    factorId: string;
    ip: string | null;
    otpHash: string | null;
    seconds: number;
    webAuthn?: CeremonySession;
  },
): Promise<{ id: string; expiresAt: number }> {
  const { rows } = await db.query(
    `with c as (insert into auth.mfa_challenges (factor_id, ip_address, otp_code, web_authn_session_data)
                values ($1, $2, $3, $5) returning *),
          f as (update auth.mfa_factors set last_challenged_at = now() where id = $1)
     select id, extract(epoch from created_at)::bigint + $4 as expires_at from c`,
    [
      challenge.factorId,
      challenge.ip,
      challenge.otpHash,
      challenge.seconds,
      challenge.webAuthn ? JSON.stringify(challenge.webAuthn) : null,
    ],
  );
  return { id: rows[0].id, expiresAt: Number(rows[0].expires_at) };
}

export interface ChallengeRow {
  id: string;
  verified_at: Date | null;
  otp_code: string | null;
  web_authn_session_data: CeremonySession | null;
  /** The address it was made from (text). */
  ip: string | null;
  /** Seconds since it was made. */
  age: string;
}

export async function challengeOf(db: Db, id: string, factorId: string): Promise<ChallengeRow | undefined> {
  const { rows } = await db.query(
    `select id, verified_at, otp_code, web_authn_session_data, host(ip_address) as ip, extract(epoch from now() - created_at) as age
       from auth.mfa_challenges where id = $1 and factor_id = $2`,
    [id, factorId],
  );
  return rows[0];
}

export async function deleteChallenge(db: Db, id: string): Promise<void> {
  await db.query("delete from auth.mfa_challenges where id = $1", [id]);
}

/** Marks a challenge verified: false when it was already (a code verifies one session once). */
export async function spendChallenge(db: Db, id: string): Promise<boolean> {
  const spent = await db.query(
    "update auth.mfa_challenges set verified_at = now() where id = $1 and verified_at is null",
    [id],
  );
  return spent.rowCount === 1;
}
