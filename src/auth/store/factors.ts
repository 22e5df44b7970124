import type pg from "pg";

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
}

/** A factor as the auth client reads it. */
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

export async function factorsOf(db: Db, userId: string): Promise<FactorRow[]> {
  return (await db.query("select * from auth.mfa_factors where user_id = $1 order by created_at", [userId]))
    .rows;
}

export async function factorOfUser(db: Db, userId: string, id: string): Promise<FactorRow | undefined> {
  return (await db.query("select * from auth.mfa_factors where id = $1 and user_id = $2", [id, userId]))
    .rows[0];
}

/** A new unverified factor: a TOTP one with its secret, or a phone one with its number. */
export async function insertFactor(
  db: Db,
  factor: { userId: string; friendlyName: string; type: "totp" | "phone"; secret?: string; phone?: string },
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
  challenge: { factorId: string; ip: string | null; otpHash: string | null; seconds: number },
): Promise<{ id: string; expiresAt: number }> {
  const { rows } = await db.query(
    `with c as (insert into auth.mfa_challenges (factor_id, ip_address, otp_code) values ($1, $2, $3)
                returning *),
          f as (update auth.mfa_factors set last_challenged_at = now() where id = $1)
     select id, extract(epoch from created_at)::bigint + $4 as expires_at from c`,
    [challenge.factorId, challenge.ip, challenge.otpHash, challenge.seconds],
  );
  return { id: rows[0].id, expiresAt: Number(rows[0].expires_at) };
}

export interface ChallengeRow {
  id: string;
  verified_at: Date | null;
  otp_code: string | null;
  /** The address it was made from (text). */
  ip: string | null;
  /** Seconds since it was made. */
  age: string;
}

export async function challengeOf(db: Db, id: string, factorId: string): Promise<ChallengeRow | undefined> {
  const { rows } = await db.query(
    `select id, verified_at, otp_code, host(ip_address) as ip, extract(epoch from now() - created_at) as age
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
