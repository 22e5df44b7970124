import type pg from "pg";
import { to as copyTo } from "pg-copy-streams";
import { withAdminTransaction, withSnapshotTransaction } from "../../db/transaction";
import type { ProjectRuntime } from "../../projects/runtime";
import { copyRowsInto, quoteIdent, withOwnerLoad, type StrataLoad } from "../../projects/ownerLoad";
import { withBuiltInExtensions } from "../../modules/extensions";
import { withProjectSqlClient } from "../database/sqlRunner";
import { ensureHistory } from "../../projects/migrationHistory";
import { withHistory } from "../database/store";

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

/** The migrations of a project's history (the CLI's and the API's, read as its owner), oldest first. */
function historyWhere(project: ProjectRuntime, applied: boolean): Promise<Migration[]> {
  return withHistory(project, async (client) => {
    const { rows } = await client.query(
      `select version, name, coalesce(statements, '{}') as statements, rollback, created_by, idempotency_key
         from supabase_migrations.schema_migrations where applied = $1 order by version`,
      [applied],
    );
    return rows;
  });
}

/** The applied migrations of a project, oldest first. */
export const appliedMigrations = (project: ProjectRuntime) => historyWhere(project, true);

/** Migrations recorded on a project but not applied (PUT .../database/migrations), oldest first. */
export const pendingMigrations = (project: ProjectRuntime) => historyWhere(project, false);

/** The versions a project's history has recorded. */
export const recordedVersions = (project: ProjectRuntime): Promise<Set<string>> =>
  withHistory(project, async (client) => {
    const { rows } = await client.query("select version from supabase_migrations.schema_migrations");
    return new Set(rows.map((r) => r.version as string));
  });

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
      await ensureHistory(client);
      for (const m of migrations) {
        await log(`applying migration ${m.version}${m.name ? ` (${m.name})` : ""} to ${target.ref}`);
        for (const statement of m.statements) {
          await client.query(await withBuiltInExtensions(client, statement)).catch((e: Error) => {
            throw new MigrationFailed(`migration ${m.version} failed: ${e.message}`);
          });
        }
        await client.query(
          `insert into supabase_migrations.schema_migrations (${MIGRATION_COLUMNS}, applied)
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

/**
 * Schemas the bootstrap makes and keeps (their rows are sessions, queues and files: never copied), and the
 * migration history, which is the branch's own (the migrations replayed on it).
 */
const NOT_COPIED_SCHEMAS = [
  "storage",
  "realtime",
  "supabase_functions",
  "graphql",
  "graphql_public",
  "supabase_migrations",
];
/** Of the auth schema only the users and their identities are data; the rest is session state. */
const COPIED_AUTH_TABLES = ["users", "identities"];

/**
 * Copies the parent's rows into the branch: every table of the user schemas (and auth's users and
 * identities) that exists in both, read from one snapshot of the parent as the parent's owner and written as
 * the branch's owner, rows already there kept; then the sequences' positions. Storage objects are not
 * copied: their bytes live outside the database.
 *
 * No superuser runs the tenant's code: the parent's policies (on a table that forces row security) run as
 * its owner, so the rows they hide from it are not copied (the log says so); the branch's defaults,
 * constraints, domains and index expressions run as the branch's owner. Its triggers are off and its foreign
 * keys checked only once every row is in, all in one transaction: a failure leaves the branch without rows.
 * Auth's rows go through Strata's own part of the load (StrataLoad), values as the parent stored them.
 */
export async function copyData(
  parent: ProjectRuntime,
  branch: ProjectRuntime,
  log: (line: string) => Promise<void>,
): Promise<void> {
  await withProjectSqlClient(parent, false, (source) =>
    withSnapshotTransaction(source, () =>
      withOwnerLoad(branch.record, branch.adminPool, "strata-branch-seed", async (target, strata) => {
        const tables = await copiedTables(source, target);
        const resume = await suspendChecks(target, tables);
        for (const t of tables) {
          const rows = await copyTable(source, target, strata, t);
          await log(`copied ${rows} row(s) of ${t.schema}.${t.name}`);
          if (t.forced)
            await log(
              `${t.schema}.${t.name} forces row level security: only the rows its policies show the owner were copied`,
            );
        }
        await copySequences(source, target);
        await resume();
      }),
    ),
  );
}

interface Table {
  schema: string;
  name: string;
  /** Columns both sides have, generated ones left out. */
  columns: string[];
  /** Partitioned on the parent: its rows are its partitions'. */
  partitioned: boolean;
  /** The parent's table forces row security: its policies decide what its owner reads. */
  forced: boolean;
  /** A superuser owns the branch's table (auth's): Strata writes its rows. */
  strata: boolean;
}

const TABLES_SQL = `
  select n.nspname as schema, c.relname as name, c.relkind = 'p' as partitioned,
         c.relrowsecurity and c.relforcerowsecurity as forced,
         (select rolsuper from pg_catalog.pg_roles where oid = c.relowner) as strata,
         array_agg(a.attname::text order by a.attnum) filter (where a.attgenerated = '') as columns
    from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
    join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
   where c.relkind in ('r', 'p') and not c.relispartition
     and not _strata_load.is_internal_schema(n.nspname)
     and n.nspname <> all($1) and (n.nspname <> 'auth' or c.relname = any($2))
     and not exists (select from pg_catalog.pg_depend d where d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                      and d.objid = c.oid and d.deptype = 'e')
   group by n.nspname, c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity, c.relowner`;

async function copiedTables(source: pg.ClientBase, target: pg.ClientBase): Promise<Table[]> {
  const params = [NOT_COPIED_SCHEMAS, COPIED_AUTH_TABLES];
  const from = await source.query(TABLES_SQL, params);
  const to = await target.query(TABLES_SQL, params);
  const targets = new Map(to.rows.map((r) => [`${r.schema}.${r.name}`, r]));
  return from.rows
    .filter((r) => targets.has(`${r.schema}.${r.name}`))
    .map((r) => {
      const other = targets.get(`${r.schema}.${r.name}`);
      return {
        schema: r.schema,
        name: r.name,
        columns: (r.columns as string[]).filter((c) => other.columns.includes(c)),
        partitioned: r.partitioned,
        forced: r.forced,
        strata: other.strata,
      };
    })
    .filter((t) => t.columns.length > 0);
}

/**
 * Turns off, on the branch's tables about to be written (their partitions too), what would run or check
 * row by row: user triggers are disabled, foreign keys made deferrable and deferred, forced row security
 * lifted (the owner would be held to its policies). Answers the function that checks the deferred keys and
 * puts every one of those back as it was.
 */
async function suspendChecks(client: pg.ClientBase, tables: Table[]): Promise<() => Promise<void>> {
  const names = tables.filter((t) => !t.strata).map((t) => `${quoteIdent(t.schema)}.${quoteIdent(t.name)}`);
  const { rows } = await client.query(
    `select format('%I.%I', n.nspname, c.relname) as tbl, c.relforcerowsecurity as forced,
            array(select jsonb_build_array(quote_ident(t.tgname), t.tgenabled) from pg_catalog.pg_trigger t
                   where t.tgrelid = c.oid and not t.tgisinternal and t.tgenabled <> 'D') as triggers,
            array(select quote_ident(k.conname) from pg_catalog.pg_constraint k
                   where k.conrelid = c.oid and k.contype = 'f' and not k.condeferrable and k.conparentid = 0) as keys
       from unnest($1::text[]) u(name)
       cross join lateral (select pg_catalog.to_regclass(u.name) as relid
                           union select relid from pg_catalog.pg_partition_tree(pg_catalog.to_regclass(u.name))) p
       join pg_catalog.pg_class c on c.oid = p.relid join pg_catalog.pg_namespace n on n.oid = c.relnamespace`,
    [names],
  );
  const ENABLE: Record<string, string> = { O: "enable", A: "enable always", R: "enable replica" };
  for (const r of rows) {
    if (r.triggers.length) await client.query(`alter table only ${r.tbl} disable trigger user`);
    for (const key of r.keys)
      await client.query(`alter table ${r.tbl} alter constraint ${key} deferrable initially deferred`);
    if (r.forced) await client.query(`alter table ${r.tbl} no force row level security`);
  }
  await client.query("set constraints all deferred");
  return async () => {
    // The deferred checks run now: ALTER TABLE refuses a table with checks pending.
    await client.query("set constraints all immediate");
    for (const r of rows) {
      for (const [trigger, enabled] of r.triggers as [string, string][])
        await client.query(`alter table only ${r.tbl} ${ENABLE[enabled]} trigger ${trigger}`);
      for (const key of r.keys)
        await client.query(`alter table ${r.tbl} alter constraint ${key} not deferrable`);
      if (r.forced) await client.query(`alter table ${r.tbl} force row level security`);
    }
  };
}

/**
 * Copies one table's rows (COPY text, as each type writes and reads itself): into a staging table first,
 * then into the table with rows already there kept; a table a superuser owns through Strata's part.
 */
async function copyTable(
  source: pg.ClientBase,
  target: pg.ClientBase,
  strata: StrataLoad,
  t: Table,
): Promise<number> {
  const table = `${quoteIdent(t.schema)}.${quoteIdent(t.name)}`;
  const columns = t.columns.map(quoteIdent).join(", ");
  const rows = () =>
    source.query(copyTo(`copy (select ${columns} from ${t.partitioned ? "" : "only "}${table}) to stdout`));
  if (t.strata) return strata.loadPlatformRows(table, t.columns, rows());
  await target.query(
    `create temporary table strata_copy on commit drop as select ${columns} from ${table} with no data`,
  );
  const copied = await copyRowsInto(target, `copy pg_temp.strata_copy (${columns}) from stdin`, rows());
  await target.query(
    `insert into ${table} (${columns}) overriding system value select ${columns} from pg_temp.strata_copy
     on conflict do nothing`,
  );
  await target.query("drop table pg_temp.strata_copy");
  return copied;
}

async function copySequences(source: pg.ClientBase, target: pg.ClientBase): Promise<void> {
  const sql = `select schemaname as schema, sequencename as name, last_value::text as last_value
                 from pg_catalog.pg_sequences
                where not _strata_load.is_internal_schema(schemaname) and schemaname <> all($1)
                  and schemaname <> 'auth' and last_value is not null`;
  const { rows } = await source.query(sql, [NOT_COPIED_SCHEMAS]);
  const present = new Set(
    (await target.query(sql.replace(" and last_value is not null", ""), [NOT_COPIED_SCHEMAS])).rows.map(
      (r) => `${r.schema}.${r.name}`,
    ),
  );
  for (const s of rows) {
    if (!present.has(`${s.schema}.${s.name}`)) continue;
    await target.query(
      "select pg_catalog.setval(pg_catalog.format('%I.%I', $1::text, $2::text)::regclass, $3::bigint, true)",
      [s.schema, s.name, s.last_value],
    );
  }
}
