import pg from "pg";
import { applyBootstrap } from "../db/bootstrap";
import { oneOffClient } from "../db/client";
import { withAdminTransaction } from "../db/transaction";
import { databaseName, withDatabase } from "../db/urls";
import { runUtilityStatement } from "../db/utility";

// Held on the main database while the control database is made and an old layout moved into it, so two
// Strata processes starting together do it once.
const CONTROL_LOCK = 7_305_004;
const MAX_IDENTIFIER = 63;

export class ControlDatabaseError extends Error {}

/**
 * The control plane's database sits beside the main one on the same cluster, named after it, so that
 * installations sharing a cluster keep theirs apart.
 */
export function controlDatabaseName(mainUrl: string): string {
  const name = `${databaseName(mainUrl)}_control`;
  if (Buffer.byteLength(name) > MAX_IDENTIFIER)
    throw new ControlDatabaseError(
      `The main database's name is too long: Strata keeps its control plane in "<name>_control", which must fit in ${MAX_IDENTIFIER} bytes`,
    );
  return name;
}

/**
 * Makes the control plane's database ready: created when missing, closed to every role but Strata's own
 * superuser connection and the log queries' reader (no project role may connect to it), bootstrapped, and holding the control plane of
 * an installation that kept it in the main database's `platform` schema (moved with every row intact).
 * Returns its URL.
 */
export async function prepareControlDatabase(mainUrl: string): Promise<string> {
  const controlUrl = withDatabase(mainUrl, controlDatabaseName(mainUrl));
  const main = oneOffClient({ connectionString: mainUrl });
  await main.connect();
  try {
    await main.query("select pg_advisory_lock($1)", [CONTROL_LOCK]);
    await createControlDatabase(main, databaseName(controlUrl));
    if (await hasOldLayout(main)) await moveControlPlane(main, controlUrl);
    await applyBootstrap(controlUrl, ["platform"]);
    // The one role besides Strata's own that connects here: log queries' reader (src/logs/query.ts).
    await runUtilityStatement(main, "grant connect on database %I to strata_log_reader", [
      databaseName(controlUrl),
    ]);
  } finally {
    await main.query("select pg_advisory_unlock($1)", [CONTROL_LOCK]).catch(() => {});
    await main.end();
  }
  return controlUrl;
}

async function createControlDatabase(main: pg.Client, name: string): Promise<void> {
  const { rowCount } = await main.query("select 1 from pg_database where datname = $1", [name]);
  if (!rowCount) {
    try {
      await runUtilityStatement(main, "create database %I", [name]);
    } catch (e) {
      throw new ControlDatabaseError(
        `Cannot create the control-plane database "${name}": ${(e as Error).message} (Strata's database user needs CREATEDB)`,
        { cause: e },
      );
    }
  }
  // Applied on every start: a grant made by hand is taken back.
  await runUtilityStatement(main, "revoke all on database %I from public", [name]);
}

/** Installations before the control database kept the control plane in the main database. */
async function hasOldLayout(main: pg.Client): Promise<boolean> {
  const { rows } = await main.query("select to_regclass('platform.projects') is not null as old");
  return rows[0].old;
}

/**
 * Copies every control-plane table from the main database into the control database in one transaction,
 * then drops the old schema. The control database is first brought to the old one's bootstrap version (the
 * same tables and columns; later files run after the copy, on the copied rows), and nothing is applied to
 * the main database. Run again after a crash between copy and drop, it finds the rows copied and only drops.
 */
async function moveControlPlane(main: pg.Client, controlUrl: string): Promise<void> {
  const { rows } = await main.query<{ version: string }>(
    "select version from _strata.bootstrap where set_name = 'platform'",
  );
  const oldVersions = new Set(rows.map((r) => r.version));
  await applyBootstrap(controlUrl, ["platform"], (version) => oldVersions.has(version));
  const control = oneOffClient({ connectionString: controlUrl });
  await control.connect();
  try {
    const copied = await control.query("select 1 from platform.projects limit 1");
    if (!copied.rowCount) {
      await withAdminTransaction(control, async () => {
        // Rows arrive in any order: foreign keys and triggers (change notifications) are not checked here.
        await control.query("set local session_replication_role = replica");
        for (const table of await platformTables(main)) await copyTable(main, control, table);
        await resetSequences(control);
      });
    }
  } finally {
    await control.end();
  }
  await withAdminTransaction(main, async () => {
    await main.query("drop schema platform cascade");
    await main.query("delete from _strata.bootstrap where set_name = 'platform'");
  });
}

async function platformTables(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'platform' and c.relkind in ('r', 'p') order by 1`,
  );
  return rows.map((r) => r.name);
}

/** One table's rows as JSON from the old side, inserted column by column (generated columns left out). */
async function copyTable(from: pg.Client, to: pg.Client, table: string): Promise<void> {
  const columnsOf = async (client: pg.Client) =>
    (
      await client.query<{ name: string }>(
        `select attname as name from pg_attribute
          where attrelid = to_regclass(format('platform.%I', $1::text)) and attnum > 0 and not attisdropped
            and attgenerated = ''`,
        [table],
      )
    ).rows.map((r) => r.name);
  // Both sides are at one bootstrap version; the intersection only guards a table made by hand.
  const theirs = new Set(await columnsOf(from));
  const columns = (await columnsOf(to)).filter((c) => theirs.has(c)).map((name) => ({ name }));
  if (!columns.length) return;
  const { rows } = await from.query<{ data: string }>(
    await formatted(from, "select coalesce(json_agg(t), '[]')::text as data from platform.%I t", [table]),
  );
  const insert = await formatted(
    to,
    `insert into platform.%1$I (%2$s) overriding system value
     select %2$s from json_populate_recordset(null::platform.%1$I, $1::json)`,
    [table, columns.map((c) => c.name)],
  );
  await to.query(insert, [rows[0].data]);
}

/**
 * A statement made by the server's `format()`: `%I` quotes an identifier, `%s` given an array of names puts
 * them quoted and comma-separated. Names here come from the catalog; they are still never spliced by hand.
 */
async function formatted(
  client: pg.Client,
  template: string,
  values: (string | string[])[],
): Promise<string> {
  const args = values.map((v, i) =>
    Array.isArray(v)
      ? `(select string_agg(quote_ident(c), ', ') from unnest($${i + 2}::text[]) c)`
      : `$${i + 2}::text`,
  );
  const { rows } = await client.query<{ q: string }>(`select format($1, ${args.join(", ")}) as q`, [
    template,
    ...values,
  ]);
  return rows[0].q;
}

/** Sequences continue after the copied rows' highest values. */
async function resetSequences(client: pg.Client): Promise<void> {
  const { rows } = await client.query<{ seq: string; tbl: string; col: string }>(
    `select s.oid::regclass::text as seq, d.refobjid::regclass::text as tbl, a.attname as col
       from pg_class s
       join pg_depend d on d.objid = s.oid and d.deptype in ('a', 'i')
       join pg_attribute a on a.attrelid = d.refobjid and a.attnum = d.refobjsubid
       join pg_namespace n on n.oid = s.relnamespace
      where s.relkind = 'S' and n.nspname = 'platform'`,
  );
  for (const { seq, tbl, col } of rows) {
    await client.query(
      await formatted(
        client,
        "select setval(%L::regclass, coalesce((select max(%I) from %s), 0) + 1, false)",
        [seq, col, tbl],
      ),
    );
  }
}
