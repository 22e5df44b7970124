import type pg from "pg";

/**
 * A project's migration history: one table the CLI, the Management API, branches and restores share, the
 * project owner's (sql/project/790_supabase_migrations.sql). Everything here runs on a connection acting as the owner.
 */

/** The platform's migration history, which the CLI makes and reads (`supabase db push`, `migration list`). */
export const MIGRATION_HISTORY = "supabase_migrations.schema_migrations";

/**
 * The columns besides `version` (the CLI's three and the platform's API's), with how a missing one is added: the
 * owner may have made the table with the CLI's columns only, or dropped the schema.
 */
const HISTORY_COLUMNS: [string, string][] = [
  ["statements", "text[]"],
  ["name", "text"],
  ["rollback", "text[]"],
  ["created_by", "text"],
  ["idempotency_key", "text"],
  // Strata's: a migration recorded without being applied (PUT) is not replayed on a branch as applied.
  ["applied", "boolean not null default true"],
  ["created_at", "timestamptz not null default now()"],
];

/** Makes the history table (as the CLI does) and the columns Strata reads, where missing; `client` acts as the owner. */
export async function ensureHistory(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query(
    `select count(*)::int as present from pg_catalog.pg_attribute
      where attrelid = pg_catalog.to_regclass($1) and attname = any($2) and not attisdropped`,
    [MIGRATION_HISTORY, HISTORY_COLUMNS.map(([name]) => name)],
  );
  if (rows[0].present === HISTORY_COLUMNS.length) return;
  await client.query("create schema if not exists supabase_migrations");
  await client.query(`create table if not exists ${MIGRATION_HISTORY} (version text not null primary key)`);
  for (const [name, type] of HISTORY_COLUMNS)
    await client.query(`alter table ${MIGRATION_HISTORY} add column if not exists ${name} ${type}`);
}
