import type pg from "pg";
import { announceFunctionsChanged, FUNCTIONS_CHANGED } from "../../functions/gate";
import { kekOf } from "../../platform/kek";
import { newRootKey } from "../../platform/secrets";
import { allRows } from "../rows";

/** platform.project_secrets (values encrypted under the project's root key) and platform.project_root_keys. */

type Queryable = pg.Pool | pg.PoolClient;

const ROOT_KEY = "platform.project_root_keys.root_key";

/** The project's root key (stored sealed with the installation's key), created on first use. */
export async function rootKeyOf(db: Queryable, ref: string): Promise<string> {
  const { rows } = await db.query(
    `insert into platform.project_root_keys (project_ref, root_key) values ($1, $2)
     on conflict (project_ref) do update set project_ref = excluded.project_ref returning root_key`,
    [ref, kekOf(db).seal(newRootKey(), ROOT_KEY)],
  );
  return kekOf(db).open(rows[0].root_key, ROOT_KEY);
}

export async function setRootKey(client: pg.PoolClient, ref: string, rootKey: string): Promise<void> {
  await client.query(
    "update platform.project_root_keys set root_key = $2, updated_at = now() where project_ref = $1",
    [ref, kekOf(client).seal(rootKey, ROOT_KEY)],
  );
}

/** The project's secrets by name, their values as digests. */
export async function listSecretDigests(
  pool: pg.Pool,
  ref: string,
): Promise<{ name: string; value: string; updated_at: Date }[]> {
  return allRows(
    pool,
    "select name, value_digest as value, updated_at from platform.project_secrets where project_ref = $1 order by name",
    [ref],
  );
}

export async function upsertSecret(
  client: pg.PoolClient,
  ref: string,
  secret: { name: string; ciphertext: string; digest: string },
): Promise<void> {
  await client.query(
    `insert into platform.project_secrets (project_ref, name, ciphertext, value_digest) values ($1, $2, $3, $4)
     on conflict (project_ref, name) do update set ciphertext = excluded.ciphertext, value_digest = excluded.value_digest, updated_at = now()`,
    [ref, secret.name, secret.ciphertext, secret.digest],
  );
  await announceFunctionsChanged(client, ref);
}

export async function deleteSecrets(pool: pg.Pool, ref: string, names: string[]): Promise<void> {
  await pool.query(
    `with s as (delete from platform.project_secrets where project_ref = $1 and name = any($2))
     select pg_notify($3, $1)`,
    [ref, names, FUNCTIONS_CHANGED],
  );
}

/** The project's encrypted secrets, locked until the caller's transaction ends. */
export async function lockSecrets(
  client: pg.PoolClient,
  ref: string,
): Promise<{ name: string; ciphertext: string }[]> {
  return allRows(
    client,
    "select name, ciphertext from platform.project_secrets where project_ref = $1 for update",
    [ref],
  );
}

export async function setCiphertext(client: pg.PoolClient, ref: string, name: string, ciphertext: string) {
  await client.query(
    "update platform.project_secrets set ciphertext = $3 where project_ref = $1 and name = $2",
    [ref, name, ciphertext],
  );
}
