import type { JWK } from "jose";
import type pg from "pg";
import {
  PRIVATE_JWK,
  type SigningAlgorithm,
  type SigningKeyRow,
  type SigningKeyStatus,
} from "../../auth/signingKeys";
import { kekOf } from "../../platform/kek";
import { withAdminTransaction } from "../../db/transaction";
import { allRows, firstRow, oneRow } from "../rows";

export async function listSigningKeys(pool: pg.Pool, ref: string): Promise<SigningKeyRow[]> {
  return allRows(pool, "select * from platform.signing_keys where project_ref = $1 order by created_at", [
    ref,
  ]);
}

export async function getSigningKey(pool: pg.Pool, ref: string, id: string) {
  return firstRow<SigningKeyRow>(
    pool,
    "select * from platform.signing_keys where project_ref = $1 and id::text = $2",
    [ref, id],
  );
}

export async function legacySigningKey(pool: pg.Pool, ref: string): Promise<SigningKeyRow | undefined> {
  return firstRow(pool, "select * from platform.signing_keys where project_ref = $1 and is_legacy", [ref]);
}

/** Demotes the current in_use key (to previously_used) when `status` is in_use: one key signs at a time. */
async function demoteInUse(client: pg.PoolClient, ref: string, status: SigningKeyStatus, except?: string) {
  if (status !== "in_use") return;
  await client.query(
    `update platform.signing_keys set status = 'previously_used', updated_at = now()
      where project_ref = $1 and status = 'in_use' and id::text is distinct from $2`,
    [ref, except ?? null],
  );
}

export function insertSigningKey(
  pool: pg.Pool,
  ref: string,
  key: {
    id: string;
    algorithm: SigningAlgorithm;
    status: SigningKeyStatus;
    privateJwk: JWK;
    publicJwk: JWK | null;
    isLegacy?: boolean;
  },
): Promise<SigningKeyRow> {
  return withAdminTransaction(pool, async (client) => {
    await demoteInUse(client, ref, key.status);
    return oneRow(
      client,
      `insert into platform.signing_keys (id, project_ref, algorithm, status, private_jwk, public_jwk, is_legacy)
       values ($1, $2, $3, $4, $5, $6, $7) returning *`,
      [
        key.id,
        ref,
        key.algorithm,
        key.status,
        JSON.stringify(kekOf(pool).seal(JSON.stringify(key.privateJwk), PRIVATE_JWK)),
        key.publicJwk && JSON.stringify(key.publicJwk),
        key.isLegacy ?? false,
      ],
    );
  });
}

export function setSigningKeyStatus(
  pool: pg.Pool,
  ref: string,
  id: string,
  status: SigningKeyStatus,
): Promise<SigningKeyRow | undefined> {
  return withAdminTransaction(pool, async (client) => {
    await demoteInUse(client, ref, status, id);
    return firstRow(
      client,
      `update platform.signing_keys
          set status = $3, updated_at = now(),
              revoked_at = case when $3 = 'revoked' then coalesce(revoked_at, now()) else null end
        where project_ref = $1 and id::text = $2
        returning *`,
      [ref, id, status],
    );
  });
}

export async function deleteSigningKey(pool: pg.Pool, ref: string, id: string): Promise<void> {
  await pool.query("delete from platform.signing_keys where project_ref = $1 and id::text = $2", [ref, id]);
}
