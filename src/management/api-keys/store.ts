import type pg from "pg";
import { newOpaqueKey, type OpaqueKeyType } from "../../auth/apiKeys";
import { sha256 } from "../../platform/ids";
import { kekOf } from "../../platform/kek";

export interface ApiKeyRow {
  id: string;
  type: OpaqueKeyType;
  name: string;
  description: string | null;
  secret: string;
  secret_jwt_template: Record<string, unknown> | null;
  inserted_at: Date;
  updated_at: Date;
}

const COLUMNS = "id, type, name, description, secret, secret_jwt_template, inserted_at, updated_at";
/** The key itself is stored sealed (it is revealed on request); requests find it by `key_hash`. */
const SECRET = "platform.api_keys.secret";

function opened(pool: pg.Pool, row: ApiKeyRow | undefined): ApiKeyRow | undefined {
  return row && { ...row, secret: kekOf(pool).open(row.secret, SECRET) };
}

export async function listApiKeys(pool: pg.Pool, ref: string): Promise<ApiKeyRow[]> {
  const { rows } = await pool.query(
    `select ${COLUMNS} from platform.api_keys where project_ref = $1 order by inserted_at`,
    [ref],
  );
  return rows.map((r) => opened(pool, r)!);
}

export async function getApiKey(pool: pg.Pool, ref: string, id: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await pool.query(
    `select ${COLUMNS} from platform.api_keys where project_ref = $1 and id::text = $2`,
    [ref, id],
  );
  return opened(pool, rows[0]);
}

export async function createApiKey(
  pool: pg.Pool,
  ref: string,
  input: { type: OpaqueKeyType; name: string; description?: string | null; secret_jwt_template?: object },
): Promise<ApiKeyRow | undefined> {
  const value = newOpaqueKey(input.type);
  const { rows } = await pool.query(
    `insert into platform.api_keys (project_ref, type, name, description, key_hash, secret, secret_jwt_template)
     values ($1, $2, $3, $4, $5, $6, $7)
     on conflict (project_ref, name) do nothing
     returning ${COLUMNS}`,
    [
      ref,
      input.type,
      input.name,
      input.description ?? null,
      sha256(value),
      kekOf(pool).seal(value, SECRET),
      input.secret_jwt_template ? JSON.stringify(input.secret_jwt_template) : null,
    ],
  );
  return opened(pool, rows[0]);
}

export async function updateApiKey(
  pool: pg.Pool,
  ref: string,
  id: string,
  changes: { name?: string; description?: string | null; secret_jwt_template?: object },
): Promise<ApiKeyRow | undefined> {
  const { rows } = await pool.query(
    `update platform.api_keys
        set name = coalesce($3, name),
            description = case when $4::boolean then $5 else description end,
            secret_jwt_template = coalesce($6, secret_jwt_template),
            updated_at = now()
      where project_ref = $1 and id::text = $2
      returning ${COLUMNS}`,
    [
      ref,
      id,
      changes.name ?? null,
      "description" in changes,
      changes.description ?? null,
      changes.secret_jwt_template ? JSON.stringify(changes.secret_jwt_template) : null,
    ],
  );
  return opened(pool, rows[0]);
}

export async function deleteApiKey(pool: pg.Pool, ref: string, id: string): Promise<ApiKeyRow | undefined> {
  const { rows } = await pool.query(
    `delete from platform.api_keys where project_ref = $1 and id::text = $2 returning ${COLUMNS}`,
    [ref, id],
  );
  return opened(pool, rows[0]);
}

export async function setLegacyKeysEnabled(pool: pg.Pool, ref: string, enabled: boolean): Promise<void> {
  await pool.query(
    "update platform.projects set legacy_keys_enabled = $2, updated_at = now() where ref = $1",
    [ref, enabled],
  );
}
