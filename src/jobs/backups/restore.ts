import { Readable } from "node:stream";
import type pg from "pg";
import { withBuiltInExtensions } from "../../modules/extensions";
import { ensureHistory, MIGRATION_HISTORY } from "../../projects/migrationHistory";
import { copyRowsInto, type StrataLoad } from "../../projects/ownerLoad";
import { MANAGED_SCHEMAS, userSchemas } from "./dump";

/** Reads lines and byte runs from a stream of Buffers. */
class Reader {
  private buffer: Buffer = Buffer.alloc(0);
  private done = false;
  private readonly source: AsyncIterator<Buffer>;

  constructor(source: AsyncIterable<Buffer>) {
    this.source = source[Symbol.asyncIterator]();
  }

  private async fill(): Promise<boolean> {
    if (this.done) return false;
    const next = await this.source.next();
    if (next.done) {
      this.done = true;
      return false;
    }
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, next.value]) : next.value;
    return true;
  }

  /** The next line without its newline, as bytes; null at the end. */
  async line(): Promise<Buffer | null> {
    for (;;) {
      const at = this.buffer.indexOf(10);
      if (at >= 0) {
        const line = this.buffer.subarray(0, at);
        this.buffer = this.buffer.subarray(at + 1);
        return line;
      }
      if (!(await this.fill())) {
        if (!this.buffer.length) return null;
        const rest = this.buffer;
        this.buffer = Buffer.alloc(0);
        return rest;
      }
    }
  }

  async bytes(n: number): Promise<Buffer> {
    while (this.buffer.length < n) {
      if (!(await this.fill())) throw new Error("the backup file ends in the middle of a statement");
    }
    const out = this.buffer.subarray(0, n);
    this.buffer = this.buffer.subarray(n);
    return out;
  }
}

/** SQLSTATE insufficient_privilege. */
const INSUFFICIENT_PRIVILEGE = "42501";

/**
 * Runs statements each in a savepoint; those that fail (a view over a view defined later, a function whose
 * type comes later) are tried again while any pass makes progress. What still fails aborts the restore,
 * except what the owner may not do (SQLSTATE 42501): an object given to a superuser, a comment on public,
 * an extension only a superuser may create (in backups taken before restores ran as the owner). Those are
 * what a superuser made; the load runs as the owner, so they are left out and answered. Left out only while
 * the session still acts as the owner: tenant code that switched it to another role fails the restore.
 */
async function runSection(
  client: pg.ClientBase,
  strata: StrataLoad,
  statements: string[],
): Promise<string[]> {
  let pending = statements;
  for (;;) {
    const failed: { sql: string; error: Error & { code?: string } }[] = [];
    for (const sql of pending) {
      await client.query("savepoint strata_restore_step");
      try {
        await client.query(sql);
        await client.query("release savepoint strata_restore_step");
      } catch (e) {
        await client.query("rollback to savepoint strata_restore_step");
        failed.push({ sql, error: e as Error });
      }
    }
    if (!failed.length) return [];
    if (failed.length === pending.length) {
      const first = failed.find((f) => f.error.code !== INSUFFICIENT_PRIVILEGE) ?? failed[0];
      if (first.error.code === INSUFFICIENT_PRIVILEGE && (await strata.actsAsOwner()))
        return failed.map((f) => f.sql);
      throw new Error(`${first.error.message} (in: ${first.sql.slice(0, 200)})`);
    }
    pending = failed.map((f) => f.sql);
  }
}

// Names as the dump writes them (format('%I.%I'), quote_ident): bare, or double-quoted with "" inside.
const IDENT = String.raw`(?:"(?:[^"]|"")+"|[a-z_][a-z0-9_$]*)`;
const QUALIFIED = `${IDENT}\\.${IDENT}`;
const COPY_STATEMENT = new RegExp(`^copy (${QUALIFIED}) \\((${IDENT}(?:, ${IDENT})*)\\) from stdin;?$`);
const TRUNCATE_STATEMENT = new RegExp(`^truncate table (${QUALIFIED}(?:, ${QUALIFIED})*);?$`);
const SETVAL_STATEMENT = /^select pg_catalog\.setval\('((?:[^']|'')*)', (-?\d+), (true|false)\);?$/;

const unquote = (ident: string) => (ident.startsWith('"') ? ident.slice(1, -1).replace(/""/g, '"') : ident);
const all = (text: string, pattern: string) => [...text.matchAll(new RegExp(pattern, "g"))].map((m) => m[0]);

/** Whether a superuser owns the relation `name` (a platform table or sequence: Strata writes it, not the owner). */
async function ownedBySuperuser(client: pg.ClientBase, name: string): Promise<boolean> {
  const { rows } = await client.query(
    `select coalesce((select r.rolsuper from pg_catalog.pg_class c join pg_catalog.pg_roles r on r.oid = c.relowner
                       where c.oid = pg_catalog.to_regclass($1)), false) as strata`,
    [name],
  );
  return rows[0].strata;
}

/**
 * The platform's tables the owner owns (storage's, realtime's) before their rows are loaded: their triggers
 * and policies go (the dump brings back those it saw) and forced row security is lifted (COPY refuses it;
 * the dump sets it again). Those a superuser owns (auth's) keep theirs: the owner may not change them.
 */
async function preparePlatformTables(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query(
    `select format('%I.%I', n.nspname, c.relname) as tbl, c.relforcerowsecurity as forced,
            array(select quote_ident(tgname) from pg_catalog.pg_trigger where tgrelid = c.oid and not tgisinternal and tgparentid = 0) as triggers,
            array(select quote_ident(polname) from pg_catalog.pg_policy where polrelid = c.oid) as policies
       from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = any($1) and c.relkind in ('r', 'p') and pg_catalog.pg_has_role(c.relowner, 'USAGE')`,
    [MANAGED_SCHEMAS],
  );
  for (const m of rows) {
    for (const t of m.triggers) await client.query(`drop trigger ${t} on ${m.tbl}`);
    for (const p of m.policies) await client.query(`drop policy ${p} on ${m.tbl}`);
    if (m.forced) await client.query(`alter table ${m.tbl} no force row level security`);
  }
}

/** A table's rows in the backup, up to the `\.` line, as COPY text. */
async function* tableRows(reader: Reader): AsyncGenerator<Buffer> {
  const batch: Buffer[] = [];
  let size = 0;
  for (;;) {
    const row = await reader.line();
    if (row === null) throw new Error("the backup file ends inside a table's rows");
    if (row.length === 2 && row[0] === 0x5c && row[1] === 0x2e) break; // "\."
    batch.push(row, Buffer.from("\n"));
    size += row.length + 1;
    if (size > 256 * 1024) {
      yield Buffer.concat(batch.splice(0));
      size = 0;
    }
  }
  if (batch.length) yield Buffer.concat(batch);
}

/**
 * Where backups taken before sql/project/790 kept the migration history (Strata's table then). Its rows now go
 * into the owner's history, as the owner, a version the restored history already has keeping that row.
 */
const EARLIER_HISTORY = "strata_migrations.schema_migrations";

async function loadEarlierHistory(client: pg.ClientBase, columns: string, rows: Readable): Promise<void> {
  await ensureHistory(client);
  await client.query(
    `create temporary table earlier_history on commit drop as select ${columns} from ${MIGRATION_HISTORY} limit 0`,
  );
  await copyRowsInto(client, `copy pg_temp.earlier_history (${columns}) from stdin`, rows);
  // The history's primary key comes back with the constraints, after the rows: versions are compared here.
  await client.query(
    `insert into ${MIGRATION_HISTORY} (${columns}) select ${columns} from pg_temp.earlier_history e
      where not exists (select from ${MIGRATION_HISTORY} h where h.version = e.version)`,
  );
}

/** Loads one table's rows: as the owner, or through Strata's part for a platform table a superuser owns. */
async function loadTable(client: pg.ClientBase, strata: StrataLoad, sql: string, reader: Reader) {
  const rows = Readable.from(tableRows(reader));
  const copy = COPY_STATEMENT.exec(sql);
  if (copy?.[1] === EARLIER_HISTORY) {
    await loadEarlierHistory(client, copy[2], rows);
  } else if (copy && (await ownedBySuperuser(client, copy[1]))) {
    await strata.loadPlatformRows(copy[1], all(copy[2], IDENT).map(unquote), rows);
  } else {
    await copyRowsInto(client, sql.replace(/;$/, ""), rows);
  }
}

/** The sequences of the post section that a superuser owns (auth's): set through Strata's part. */
async function setPlatformSequences(client: pg.ClientBase, strata: StrataLoad, post: string[]) {
  const rest: string[] = [];
  for (const sql of post) {
    const setval = SETVAL_STATEMENT.exec(sql);
    const name = setval?.[1].replace(/''/g, "'");
    if (setval && name && (await ownedBySuperuser(client, name))) {
      await strata.setPlatformSequence(name, setval[2], setval[3] === "true");
    } else rest.push(sql);
  }
  return rest;
}

/**
 * Brings the connected database back to a dump of writeDump, in the caller's transaction, which runs as the
 * project's owner (withOwnerLoad): the user's schemas as they are now are dropped whole, the platform's
 * tables emptied and the triggers and policies the owner made on them dropped, then the dump's definitions,
 * rows and what is built on them are applied, as the owner: the tenant's code (constraints, defaults,
 * domains, index expressions, materialized views) runs with the owner's rights. Only the rows and sequences
 * of the platform's tables a superuser owns (auth's) are written by `strata`. Any
 * failure throws, and the caller's rollback leaves the database as it was. Answers the statements left out
 * because they need more than the owner's rights (see runSection).
 */
export async function applyDump(
  client: pg.ClientBase,
  strata: StrataLoad,
  source: AsyncIterable<Buffer>,
  progress: () => void,
): Promise<string[]> {
  await client.query("set local check_function_bodies = off");
  await client.query("set local search_path = ''");
  await strata.dropUserSchemas(await userSchemas(client));
  await preparePlatformTables(client);

  const reader = new Reader(source);
  const pre: string[] = [];
  const post: string[] = [];
  const skipped: string[] = [];
  let preApplied = false;
  const applyPre = async () => {
    if (preApplied) return;
    preApplied = true;
    skipped.push(...(await runSection(client, strata, pre)));
  };
  for (;;) {
    const line = await reader.line();
    if (line === null) throw new Error("the backup file is cut short (no end marker)");
    const text = line.toString("utf8");
    const marker = /^-- strata:(pre|post|truncate|copy|end) (\d+)$/.exec(text);
    if (!marker) continue;
    const [, tag, length] = marker;
    if (tag === "end") break;
    const sql = (await reader.bytes(Number(length))).toString("utf8");
    await reader.line();
    // A module's extension from a cluster Strata runs (src/db/installation.ts) is a notice where there is none.
    if (tag === "pre") pre.push(await withBuiltInExtensions(client, sql));
    else if (tag === "post") post.push(sql);
    else if (tag === "truncate") {
      await applyPre();
      const list = TRUNCATE_STATEMENT.exec(sql);
      if (!list) throw new Error(`the backup's truncate statement is not Strata's: ${sql.slice(0, 200)}`);
      const tables = all(list[1], QUALIFIED).filter((t) => t !== EARLIER_HISTORY);
      if (tables.length) await strata.truncatePlatformTables(tables);
    } else {
      await applyPre();
      await loadTable(client, strata, sql, reader);
      progress();
    }
  }
  await applyPre();
  skipped.push(...(await runSection(client, strata, await setPlatformSequences(client, strata, post))));
  return skipped;
}
