import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { finished } from "node:stream/promises";
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

/**
 * Runs statements each in a savepoint; those that fail (a view over a view defined later, a function whose
 * type comes later) are tried again while any pass makes progress. What still fails aborts the restore.
 */
async function runSection(client: pg.ClientBase, statements: string[]): Promise<void> {
  let pending = statements;
  for (;;) {
    const failed: { sql: string; error: Error }[] = [];
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
    if (!failed.length) return;
    if (failed.length === pending.length) {
      const first = failed[0];
      throw new Error(`${first.error.message} (in: ${first.sql.slice(0, 200)})`);
    }
    pending = failed.map((f) => f.sql);
  }
}

/**
 * Brings the connected database back to a dump of writeDump, in the caller's transaction: the user's
 * schemas as they are now are dropped whole, the platform's tables emptied and their user-made triggers and
 * policies dropped, then the dump's definitions, rows and what is built on them are applied. Any failure
 * throws, and the caller's rollback leaves the database as it was.
 */
export async function applyDump(
  client: pg.ClientBase,
  source: AsyncIterable<Buffer>,
  progress: () => void,
): Promise<void> {
  await client.query("set local session_replication_role = replica");
  await client.query("set local check_function_bodies = off");
  await client.query("set local search_path = ''");
  for (const schema of await userSchemas(client)) {
    await client.query(`drop schema "${schema.replace(/"/g, '""')}" cascade`);
  }
  // The dump recreates every trigger and policy of the platform's tables it saw (the bootstrap's too).
  const { rows: managed } = await client.query(
    `select format('%I.%I', n.nspname, c.relname) as tbl,
            array(select quote_ident(tgname) from pg_trigger where tgrelid = c.oid and not tgisinternal and tgparentid = 0) as triggers,
            array(select quote_ident(polname) from pg_policy where polrelid = c.oid) as policies
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = any($1) and c.relkind in ('r', 'p')`,
    [MANAGED_SCHEMAS],
  );
  for (const m of managed) {
    for (const t of m.triggers) await client.query(`drop trigger ${t} on ${m.tbl}`);
    for (const p of m.policies) await client.query(`drop policy ${p} on ${m.tbl}`);
  }

  const reader = new Reader(source);
  const pre: string[] = [];
  const post: string[] = [];
  let preApplied = false;
  const applyPre = async () => {
    if (preApplied) return;
    preApplied = true;
    await runSection(client, pre);
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
    if (tag === "pre") pre.push(sql);
    else if (tag === "post") post.push(sql);
    else if (tag === "truncate") {
      await applyPre();
      await client.query(sql);
    } else {
      await applyPre();
      const into = client.query(copyFrom(sql.replace(/;$/, "")));
      const batch: Buffer[] = [];
      let size = 0;
      const flush = async () => {
        if (!batch.length) return;
        const chunk = Buffer.concat(batch);
        batch.length = 0;
        size = 0;
        if (!into.write(chunk)) await new Promise((r) => into.once("drain", r));
      };
      for (;;) {
        const row = await reader.line();
        if (row === null) throw new Error("the backup file ends inside a table's rows");
        if (row.length === 2 && row[0] === 0x5c && row[1] === 0x2e) break; // "\."
        batch.push(row, Buffer.from("\n"));
        size += row.length + 1;
        if (size > 256 * 1024) await flush();
      }
      await flush();
      into.end();
      await finished(into);
      progress();
    }
  }
  await applyPre();
  await runSection(client, post);
}
