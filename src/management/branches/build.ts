import type pg from "pg";
import { oneOffClient } from "../../db/client";
import { withAdminTransaction, withSnapshotTransaction } from "../../db/transaction";
import type { ProjectRuntime } from "../../projects/runtime";
import { withProjectSqlClient } from "../database/sqlRunner";

/**
 * What a branch is made of: the parent's applied migrations, replayed on a freshly bootstrapped database
 * (as the platform builds a branch from its migrations), and, when asked, a copy of the parent's rows.
 */

export interface Migration {
  version: string;
  name: string | null;
  statements: string[];
  rollback: string[] | null;
  created_by: string | null;
  idempotency_key: string | null;
}

const MIGRATION_COLUMNS = "version, name, statements, rollback, created_by, idempotency_key";

/** The applied migrations of a project, oldest first. */
export async function appliedMigrations(project: ProjectRuntime): Promise<Migration[]> {
  const { rows } = await project.adminPool.query(
    `select ${MIGRATION_COLUMNS} from strata_migrations.schema_migrations where applied order by version`,
  );
  return rows;
}

/** Migrations recorded on a project but not applied (PUT .../database/migrations), oldest first. */
export async function pendingMigrations(project: ProjectRuntime): Promise<Migration[]> {
  const { rows } = await project.adminPool.query(
    `select ${MIGRATION_COLUMNS} from strata_migrations.schema_migrations where not applied order by version`,
  );
  return rows;
}

/**
 * Applies `migrations` to `target` in one transaction as the project's owner (as POST .../migrations does),
 * recording each as applied: a failing statement rolls all of them back, so the target is left unchanged.
 * `log` receives a line per migration.
 */
export async function applyMigrations(
  target: ProjectRuntime,
  migrations: Migration[],
  log: (line: string) => Promise<void>,
): Promise<void> {
  if (migrations.length === 0) return;
  await withProjectSqlClient(target, false, (client) =>
    withAdminTransaction(client, async () => {
      for (const m of migrations) {
        await log(`applying migration ${m.version}${m.name ? ` (${m.name})` : ""} to ${target.ref}`);
        for (const statement of m.statements) {
          await client.query(statement).catch((e: Error) => {
            throw new MigrationFailed(`migration ${m.version} failed: ${e.message}`);
          });
        }
        await client.query(
          `insert into strata_migrations.schema_migrations (${MIGRATION_COLUMNS}, applied)
           values ($1, $2, $3, $4, $5, $6, true)
           on conflict (version) do update set applied = true`,
          [m.version, m.name, m.statements, m.rollback, m.created_by, m.idempotency_key],
        );
      }
    }),
  );
  target.invalidateSchema("branch migrations applied");
}

/** A migration's SQL failed: the run fails with this message, the target unchanged. */
export class MigrationFailed extends Error {}

/** Schemas the bootstrap makes and keeps (their rows are sessions, queues and files: never copied). */
const NOT_COPIED_SCHEMAS = ["storage", "realtime", "supabase_functions", "graphql", "graphql_public"];
/** Of the auth schema only the users and their identities are data; the rest is session state. */
const COPIED_AUTH_TABLES = ["users", "identities"];
const BATCH_ROWS = 500;
let cursors = 0;

/**
 * Copies the parent's rows into the branch: every table of the user schemas (and auth's users and
 * identities) that exists in both, read from one snapshot of the parent, written with triggers and foreign
 * keys off (`session_replication_role = replica`, as a restore does) and rows already there kept; then the
 * sequences' positions. Storage objects are not copied: their bytes live outside the database.
 */
export async function copyData(
  parent: ProjectRuntime,
  branch: ProjectRuntime,
  log: (line: string) => Promise<void>,
): Promise<void> {
  const source = oneOffClient({ connectionString: parent.record.adminUrl });
  const target = oneOffClient({ connectionString: branch.record.adminUrl });
  await source.connect();
  try {
    await target.connect();
    await withSnapshotTransaction(source, () =>
      withAdminTransaction(target, async () => {
        await target.query("set local session_replication_role = replica");
        const tables = await copiedTables(source, target);
        for (const t of tables) {
          const rows = await copyTable(source, target, t);
          await log(`copied ${rows} row(s) of ${t.schema}.${t.name}`);
        }
        await copySequences(source, target);
      }),
    );
  } finally {
    await source.end().catch(() => {});
    await target.end().catch(() => {});
  }
}

interface Table {
  schema: string;
  name: string;
  /** Columns both sides have, generated ones left out. */
  columns: string[];
}

const TABLES_SQL = `
  select n.nspname as schema, c.relname as name,
         array_agg(a.attname::text order by a.attnum) filter (where a.attgenerated = '') as columns
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
   where c.relkind in ('r', 'p') and not c.relispartition
     and not _strata.is_internal_schema(n.nspname)
     and n.nspname <> all($1) and (n.nspname <> 'auth' or c.relname = any($2))
     and not exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
   group by n.nspname, c.relname`;

async function copiedTables(source: pg.ClientBase, target: pg.ClientBase): Promise<Table[]> {
  const params = [NOT_COPIED_SCHEMAS, COPIED_AUTH_TABLES];
  const [from, to] = await Promise.all([source.query(TABLES_SQL, params), target.query(TABLES_SQL, params)]);
  const targetColumns = new Map(to.rows.map((r) => [`${r.schema}.${r.name}`, new Set<string>(r.columns)]));
  return from.rows
    .filter((r) => targetColumns.has(`${r.schema}.${r.name}`))
    .map((r) => ({
      schema: r.schema,
      name: r.name,
      columns: (r.columns as string[]).filter((c) => targetColumns.get(`${r.schema}.${r.name}`)!.has(c)),
    }))
    .filter((t) => t.columns.length > 0);
}

async function copyTable(source: pg.ClientBase, target: pg.ClientBase, t: Table): Promise<number> {
  const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;
  const table = `${ident(t.schema)}.${ident(t.name)}`;
  const columns = t.columns.map(ident).join(", ");
  let copied = 0;
  // Keyset paging is not possible on every table; a cursor reads the snapshot in batches.
  const cursor = `strata_copy_${++cursors}`;
  await source.query(
    `declare ${cursor} no scroll cursor for select to_jsonb(r) as row from (select ${columns} from ${table}) r`,
  );
  try {
    for (;;) {
      const { rows } = await source.query(`fetch ${BATCH_ROWS} from ${cursor}`);
      if (rows.length === 0) break;
      await target.query(
        `insert into ${table} (${columns}) overriding system value
         select ${columns} from jsonb_populate_recordset(null::${table}, $1::jsonb) on conflict do nothing`,
        [JSON.stringify(rows.map((r) => r.row))],
      );
      copied += rows.length;
    }
  } finally {
    await source.query(`close ${cursor}`);
  }
  return copied;
}

async function copySequences(source: pg.ClientBase, target: pg.ClientBase): Promise<void> {
  const sql = `select schemaname as schema, sequencename as name, last_value::text as last_value
                 from pg_sequences where not _strata.is_internal_schema(schemaname) and schemaname <> all($1)
                  and last_value is not null`;
  const { rows } = await source.query(sql, [NOT_COPIED_SCHEMAS]);
  const present = new Set(
    (await target.query(sql.replace(" and last_value is not null", ""), [NOT_COPIED_SCHEMAS])).rows.map(
      (r) => `${r.schema}.${r.name}`,
    ),
  );
  for (const s of rows) {
    if (!present.has(`${s.schema}.${s.name}`)) continue;
    await target.query("select setval(format('%I.%I', $1::text, $2::text)::regclass, $3::bigint, true)", [
      s.schema,
      s.name,
      s.last_value,
    ]);
  }
}
