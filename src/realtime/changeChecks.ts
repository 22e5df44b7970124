import type pg from "pg";
import type { Pgoutput } from "pg-logical-replication";
import { sql, type SQL } from "pg-sql2";
import type { RequestAuth } from "../auth/dataAuth";
import { queryInOneRoundTrip } from "../db/transaction";
import type { Logger } from "../log";
import type { ProjectRuntime } from "../projects/runtime";

/**
 * What a subscriber's role may see of a decoded transaction (changes.ts delivers it): checked in the database
 * as that role with its claims, so grants and RLS decide, as on the platform.
 */

/** How delivery waits for a decoded commit to become visible to snapshots (normally microseconds). */
const VISIBLE_TRIES = 200;
const VISIBLE_WAIT_MS = 5;

export type Change = Pgoutput.MessageInsert | Pgoutput.MessageUpdate | Pgoutput.MessageDelete;

export interface TableInfo {
  rls: boolean;
  pk: { name: string; typeSchema: string; typeName: string }[];
}

/** What one role and its claims may see of a transaction's changes. */
export interface Visibility {
  /** Changes (by index) it may see. */
  visible: Set<number>;
  /** Changes (by index) it gets as an error only, as the platform sends them. */
  errors: Map<number, string>;
  /** Per table, the columns the role may select (the platform leaves the others out). */
  columns: Map<number, Set<string>>;
}

/** The feed's side of a check: its project (the data pool of the moment), its tables' facts, its log. */
export interface CheckingFeed {
  project: Pick<ProjectRuntime, "ref" | "dataPool">;
  tableInfo(oid: number): Promise<TableInfo>;
  log: Logger;
}

/**
 * Waits until the transaction is visible to new snapshots. Its commit record is decoded (and sent here)
 * before the committing backend leaves the proc array, so a row check that runs at once may not see the
 * row yet and would drop the change for every subscriber.
 */
export async function untilVisible(adminPool: pg.Pool, xid: number): Promise<void> {
  for (let i = 0; i < VISIBLE_TRIES; i++) {
    // The 32-bit xid from the stream, widened with the current epoch (the one before if it wrapped).
    const { rows } = await adminPool.query(
      `select pg_visible_in_snapshot(
                (case when full_xid > xmax then full_xid - 4294967296 else full_xid end)::text::xid8, s) as visible
         from (select s, pg_snapshot_xmax(s)::text::bigint as xmax,
                      ((pg_snapshot_xmax(s)::text::bigint >> 32) << 32) | $1::bigint as full_xid
                 from pg_current_snapshot() s) v`,
      [xid],
    );
    if (rows[0]?.visible) return;
    await new Promise((r) => setTimeout(r, VISIBLE_WAIT_MS));
  }
}

/**
 * The changes (by index) `auth` may see: SELECT on the table, and for a table with RLS an insert or
 * update whose row, found by primary key, passes the role's policies now (once `visibleSoon`, the
 * transaction's visibility to new snapshots, settled). Two round trips, each with the role and claims set:
 * the columns the role may select of every table, then the rows of every table it must find again.
 */
export async function visibleTo(
  feed: CheckingFeed,
  auth: RequestAuth,
  indexes: number[],
  matches: { change: Change; record: Record<string, unknown> }[],
  visibleSoon: Promise<void> | undefined,
): Promise<Visibility> {
  const visible = new Set<number>();
  const errors = new Map<number, string>();
  const columns = new Map<number, Set<string>>();
  const byTable = new Map<number, number[]>();
  for (const i of indexes) {
    const oid = matches[i].change.relation.relationOid;
    byTable.set(oid, [...(byTable.get(oid) ?? []), i]);
  }
  const scope = { role: auth.role, claims: auth.claims };
  try {
    // The columns the role may select (column grants count, as on the platform).
    const { rows } = await queryInOneRoundTrip(feed.project.dataPool, scope, {
      text: `select attrelid as oid, array_agg(attname::text) as columns from pg_attribute
              where attrelid = any($1::oid[]) and attnum > 0 and not attisdropped
                and has_column_privilege(attrelid, attnum, 'SELECT')
              group by attrelid`,
      values: [[...byTable.keys()]],
    });
    for (const r of rows) columns.set(r.oid, new Set<string>(r.columns));
    const rowChecks: SQL[] = [];
    for (const [oid, list] of byTable) {
      const selectable = columns.get(oid) ?? new Set<string>();
      columns.set(oid, selectable);
      const info = await feed.tableInfo(oid);
      const writes = list.filter((i) => matches[i].change.tag !== "delete");
      // As the platform: an insert or update of a table without a primary key, or whose key the role
      // may not select, reaches the subscriber as an error.
      const error = !info.pk.length
        ? "Error 400: Bad Request, no primary key"
        : !info.pk.every((c) => selectable.has(c.name))
          ? "Error 401: Unauthorized"
          : undefined;
      if (error) for (const i of writes) errors.set(i, error);
      if (!selectable.size) continue;
      for (const i of list) if (matches[i].change.tag === "delete") visible.add(i);
      if (error) continue;
      if (!info.rls) for (const i of writes) visible.add(i);
      else if (writes.length) rowChecks.push(rowCheck(info, writes, matches));
    }
    if (rowChecks.length) {
      await visibleSoon;
      const query = sql.compile(sql.join(rowChecks, " union all "));
      const found = await queryInOneRoundTrip(feed.project.dataPool, scope, {
        text: query.text,
        values: query.values,
      });
      for (const r of found.rows) visible.add(r.i);
    }
  } catch (e) {
    feed.log.warn({ ref: feed.project.ref, err: (e as Error).message }, "realtime visibility check failed");
    return { visible: new Set(), errors: new Map(), columns: new Map() };
  }
  return { visible, errors, columns };
}

/** The indexes of `writes` (inserts and updates of one table) whose row, found by primary key, the role sees. */
function rowCheck(
  info: TableInfo,
  writes: number[],
  matches: { change: Change; record: Record<string, unknown> }[],
): SQL {
  const rel = matches[writes[0]].change.relation;
  // The key values travel as text arrays and are cast to each key column's type.
  const keyArrays = info.pk.map((c) =>
    writes.map((i) => (matches[i].change as Pgoutput.MessageInsert).new[c.name] ?? null),
  );
  const unnestArgs = [
    sql`${sql.value(writes)}::int[]`,
    ...keyArrays.map((values) => sql`${sql.value(values)}::text[]`),
  ];
  const aliases = [sql.identifier("i"), ...info.pk.map((_c, n) => sql.identifier(`c${n}`))];
  const conditions = info.pk.map(
    (c, n) =>
      sql`${sql.identifier("x", c.name)} = ${sql.identifier("k", `c${n}`)}::${sql.identifier(c.typeSchema, c.typeName)}`,
  );
  return sql`(select k.i from unnest(${sql.join(unnestArgs, ", ")}) as k(${sql.join(aliases, ", ")})
     where exists (select 1 from ${sql.identifier(rel.schema, rel.name)} as x
                    where ${sql.join(conditions, " and ")}))`;
}
