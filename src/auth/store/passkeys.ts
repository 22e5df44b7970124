import type pg from "pg";
import type { CeremonySession, NewCredential } from "../webauthn";

/** Passkeys (`auth.webauthn_credentials`) and the challenges of their ceremonies (`auth.webauthn_challenges`). */

type Db = pg.Pool | pg.PoolClient;

export interface PasskeyRow {
  id: string;
  user_id: string;
  credential_id: Buffer;
  public_key: Buffer;
  sign_count: string;
  transports: string[];
  friendly_name: string;
  created_at: Date;
  last_used_at: Date | null;
}

/** A passkey as the auth client lists it. */
export function toPasskey(p: PasskeyRow) {
  return {
    id: p.id,
    ...(p.friendly_name ? { friendly_name: p.friendly_name } : {}),
    created_at: p.created_at,
    ...(p.last_used_at ? { last_used_at: p.last_used_at } : {}),
  };
}

export async function passkeysOf(db: Db, userId: string): Promise<PasskeyRow[]> {
  return (
    await db.query("select * from auth.webauthn_credentials where user_id = $1 order by created_at", [userId])
  ).rows;
}

export async function passkeyOfUser(db: Db, userId: string, id: string): Promise<PasskeyRow | undefined> {
  return (
    await db.query("select * from auth.webauthn_credentials where id = $1 and user_id = $2", [id, userId])
  ).rows[0];
}

export async function passkeyByCredentialId(db: Db, credentialId: Buffer): Promise<PasskeyRow | undefined> {
  return (await db.query("select * from auth.webauthn_credentials where credential_id = $1", [credentialId]))
    .rows[0];
}

/**
 * A new passkey of the user, unless the user has `max` already (counted under a lock on the user's row, so
 * two registrations at once cannot pass the limit together); undefined when over the limit.
 */
export async function insertPasskey(
  db: pg.PoolClient,
  userId: string,
  c: NewCredential,
  friendlyName: string,
  max: number,
): Promise<PasskeyRow | undefined> {
  await db.query("select 1 from auth.users where id = $1 for update", [userId]);
  const { rows: counted } = await db.query(
    "select count(*)::int as n from auth.webauthn_credentials where user_id = $1",
    [userId],
  );
  if (counted[0].n >= max) return undefined;
  const { rows } = await db.query(
    `insert into auth.webauthn_credentials
       (user_id, credential_id, public_key, attestation_type, aaguid, sign_count, transports,
        backup_eligible, backed_up, friendly_name)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) returning *`,
    [
      userId,
      c.id,
      c.publicKey,
      c.attestationType,
      c.aaguid,
      c.counter,
      JSON.stringify(c.transports),
      c.backupEligible,
      c.backedUp,
      friendlyName,
    ],
  );
  return rows[0];
}

/**
 * Records a sign-in with the passkey at signature counter `count`: false when the stored counter is not
 * below it (an authenticator that counts nothing stays at 0 and is not refused for that).
 */
export async function claimPasskeyUse(db: Db, id: string, count: number): Promise<boolean> {
  const claimed = await db.query(
    `update auth.webauthn_credentials set sign_count = $2, last_used_at = now(), updated_at = now()
      where id = $1 and (sign_count < $2 or (sign_count = 0 and $2 = 0))`,
    [id, count],
  );
  return claimed.rowCount === 1;
}

export async function renamePasskey(db: Db, id: string, friendlyName: string): Promise<PasskeyRow> {
  const { rows } = await db.query(
    "update auth.webauthn_credentials set friendly_name = $2, updated_at = now() where id = $1 returning *",
    [id, friendlyName],
  );
  return rows[0];
}

export async function deletePasskey(db: Db, id: string): Promise<void> {
  await db.query("delete from auth.webauthn_credentials where id = $1", [id]);
}

export type PasskeyChallengeType = "registration" | "authentication";

/** A new challenge of a passkey ceremony (of `userId`'s, or of nobody's yet for a sign-in). */
export async function insertPasskeyChallenge(
  db: Db,
  challenge: { userId: string | null; type: PasskeyChallengeType; session: CeremonySession; seconds: number },
): Promise<{ id: string; expiresAt: number }> {
  // Challenges never answered are swept as new ones are made.
  await db.query("delete from auth.webauthn_challenges where expires_at < now() - interval '1 hour'");
  const { rows } = await db.query(
    `insert into auth.webauthn_challenges (user_id, challenge_type, session_data, expires_at)
     values ($1, $2, $3, now() + make_interval(secs => $4))
     returning id, extract(epoch from expires_at)::bigint as expires_at`,
    [challenge.userId, challenge.type, JSON.stringify(challenge.session), challenge.seconds],
  );
  return { id: rows[0].id, expiresAt: Number(rows[0].expires_at) };
}

/**
 * Takes a challenge (deleted as it is read, so one response verifies once): its session and whether it has
 * expired; undefined when there is no such unused challenge of that type and user.
 */
export async function consumePasskeyChallenge(
  db: Db,
  id: string,
  type: PasskeyChallengeType,
  userId: string | null,
): Promise<{ session: CeremonySession; expired: boolean } | undefined> {
  const { rows } = await db.query(
    `delete from auth.webauthn_challenges
      where id = $1 and challenge_type = $2 and user_id is not distinct from $3
      returning session_data, expires_at < now() as expired`,
    [id, type, userId],
  );
  return rows[0] && { session: rows[0].session_data, expired: rows[0].expired };
}
