import type pg from "pg";
import { withTransaction } from "../../db/transaction";
import { ensureHistory, MIGRATION_HISTORY } from "../../projects/migrationHistory";
import type { ProjectRuntime } from "../../projects/runtime";
import { allRows } from "../rows";

/**
 * The project's migration history: `supabase_migrations.schema_migrations`, the platform's table, which the CLI
 * (`supabase db push`, `migration list`) and the Management API write alike (sql/project/790_supabase_migrations.sql
 * moved the API's earlier history there). The table is the project owner's, so Strata reads and writes it only
 * as the owner (projects/migrationHistory.ts); the temporary login roles of the CLI are looked up here too.
 */

const HISTORY = MIGRATION_HISTORY;

/** Runs `work` in a transaction as the project's owner, the history table ready. */
export function withHistory<T>(
  project: ProjectRuntime,
  work: (client: pg.ClientBase) => Promise<T>,
): Promise<T> {
  return withTransaction(project.ownerPool, project.asOwnerScope, async (client) => {
    await ensureHistory(client);
    return work(client);
  });
}

export interface NewMigration {
  name: string | null;
  query: string;
  rollback: string | null;
}

/** A version in the CLI's format (UTC yyyymmddhhmmss), later than every recorded one. */
async function nextVersion(client: pg.ClientBase): Promise<string> {
  const now = new Date().toISOString().replace(/\D/g, "").slice(0, 14);
  const { rows } = await client.query(`select max(version) as v from ${HISTORY}`);
  const last: string | null = rows[0].v;
  return last && /^\d+$/.test(last) && BigInt(last) >= BigInt(now) ? String(BigInt(last) + 1n) : now;
}

export async function listMigrations(
  client: pg.ClientBase,
): Promise<{ version: string; name: string | null }[]> {
  return allRows(client, `select version, name from ${HISTORY} order by version`);
}

/** Records a migration the caller's transaction applied (or, with `applied` false, one it did not). */
export async function recordMigration(client: pg.ClientBase, m: NewMigration, applied = true): Promise<void> {
  await client.query(
    `insert into ${HISTORY} (version, name, statements, rollback, created_by, applied)
     values ($1, $2, array[$3], $4, 'management-api', $5)`,
    [await nextVersion(client), m.name, m.query, m.rollback ? [m.rollback] : null, applied],
  );
}

/** Replaces the statements of the (first) migration named `m.name`; false when there is none. */
export async function replaceNamedMigration(client: pg.ClientBase, m: NewMigration): Promise<boolean> {
  if (!m.name) return false;
  const { rows } = await client.query(`select version from ${HISTORY} where name = $1 order by version`, [
    m.name,
  ]);
  if (!rows.length) return false;
  await client.query(`update ${HISTORY} set statements = array[$2], rollback = $3 where version = $1`, [
    rows[0].version,
    m.query,
    m.rollback ? [m.rollback] : null,
  ]);
  return true;
}

/** The migrations from version `gte` on, newest first. */
export async function migrationsFrom(
  client: pg.ClientBase,
  gte: string,
): Promise<{ version: string; rollback: string[] | null; applied: boolean }[]> {
  return allRows(
    client,
    `select version, rollback, applied from ${HISTORY} where version >= $1 order by version desc`,
    [gte],
  );
}

export async function deleteMigration(client: pg.ClientBase, version: string): Promise<void> {
  await client.query(`delete from ${HISTORY} where version = $1`, [version]);
}

/** A migration with its statements, its unset fields left out. */
export async function getMigration(
  client: pg.ClientBase,
  version: string,
): Promise<Record<string, unknown> | undefined> {
  const { rows } = await client.query(
    `select version, name, coalesce(statements, '{}') as statements, coalesce(rollback, '{}') as rollback,
            created_by, idempotency_key
       from ${HISTORY} where version = $1`,
    [version],
  );
  return rows[0] && Object.fromEntries(Object.entries(rows[0]).filter(([, v]) => v !== null));
}

/** Sets a migration's name or rollback SQL (an absent one is kept); false when there is no such migration. */
export async function updateMigration(
  client: pg.ClientBase,
  version: string,
  change: { name?: string; rollback?: string },
): Promise<boolean> {
  const { rowCount } = await client.query(
    `update ${HISTORY}
        set name = coalesce($2, name), rollback = case when $3::text is null then rollback else array[$3::text] end
      where version = $1`,
    [version, change.name ?? null, change.rollback ?? null],
  );
  return Boolean(rowCount);
}

/** The project's temporary login roles, by the prefix their names share. */
export async function loginRolesWithPrefix(adminPool: pg.Pool, prefix: string): Promise<string[]> {
  const { rows } = await adminPool.query("select rolname from pg_roles where starts_with(rolname, $1)", [
    prefix,
  ]);
  return rows.map((r) => r.rolname);
}
