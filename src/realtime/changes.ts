import { randomBytes } from "node:crypto";
import { LogicalReplicationService, PgoutputPlugin, type Pgoutput } from "pg-logical-replication";
import type { RequestAuth } from "../auth/dataAuth";
import type { Logger } from "../log";
import type { ProjectRuntime } from "../projects/runtime";
import {
  untilVisible,
  visibleTo,
  type Change,
  type CheckingFeed,
  type TableInfo,
  type Visibility,
} from "./changeChecks";
import { matchingIds, type PgBinding } from "./filters";
import { EncodedJson, SharedFrame } from "./protocol";

/**
 * postgres_changes of one project on this node: one logical replication slot (pgoutput, publication
 * supabase_realtime), read by one replication connection while anyone subscribes. A committed transaction
 * is delivered in order; its LSN is confirmed to the slot only after delivery, so a change made while the
 * replication connection restarts is read again from the slot. Before a row reaches a subscriber, the
 * subscriber's role checks it in the database (grants, RLS): per distinct role+claims, one round trip for the
 * columns it may select and one for the rows it must find again, whatever the number of tables.
 */

export const PUBLICATION = "supabase_realtime";
const RESTART_MS = 1000;
const STATUS_MS = 10_000;
/** After the last subscriber leaves, the slot is kept this long for a quick resubscribe, then dropped. */
const LINGER_MS = 15_000;
/** Transactions whose visibility is checked at once (each on a connection of the project's data pool). */
const CHECK_AHEAD = 4;

/**
 * Back-pressure of the replication side: once this many decoded transactions wait for delivery, the
 * stream stops reading (the WAL waits in the slot, not in memory) and starts again from the slot when half
 * of them are delivered. `pauses` counts the stops.
 */
export const replicationBackPressure = { maxPending: 1000, pauses: 0 };

export interface ChangeData {
  schema: string;
  table: string;
  /** Null in an error, as on the platform. */
  commit_timestamp: string | null;
  type: "INSERT" | "UPDATE" | "DELETE";
  columns: { name: string; type: string }[];
  record?: Record<string, unknown>;
  old_record?: Record<string, unknown>;
  /** The platform's errors for a change the subscriber's role may not read ("Error 401: Unauthorized"). */
  errors: string[] | null;
}

export interface ChangeSubscriber {
  bindings: PgBinding[];
  /** Who the subscriber is now (it changes with access_token messages). */
  auth(): RequestAuth;
  /** A `postgres_changes` frame: `{ids, data}`, data the change as the subscriber may see it (ChangeData). */
  deliver(frame: SharedFrame): void;
}

type Row = Record<string, string | null | undefined>;

interface Transaction {
  xid: number;
  commitTime: bigint;
  changes: Change[];
}

function lsnValue(lsn: string | null): bigint {
  if (!lsn) return 0n;
  const [hi, lo] = lsn.split("/");
  return (BigInt(parseInt(hi, 16)) << 32n) | BigInt(parseInt(lo, 16));
}

/** A column's text value as the platform's JSON has it (numbers, booleans, JSON; the rest as text). */
function jsonValue(type: string, text: string | null | undefined): unknown {
  if (text === null || text === undefined) return text;
  switch (type) {
    case "bool":
      return text === "t";
    case "int2":
    case "int4":
    case "int8":
    case "float4":
    case "float8":
    case "numeric":
    case "oid": {
      const n = Number(text);
      return Number.isFinite(n) ? n : text;
    }
    case "json":
    case "jsonb":
      try {
        return JSON.parse(text);
      } catch {
        return text;
      }
    case "timestamp":
      return text.replace(" ", "T");
    case "timestamptz":
      return text.replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00");
    default:
      return text;
  }
}

/** Each auth's claims group (its role and claims as JSON), computed once per auth. */
const claimsGroups = new WeakMap<RequestAuth, string>();

function claimsGroupOf(auth: RequestAuth): string {
  let key = claimsGroups.get(auth);
  if (key === undefined) claimsGroups.set(auth, (key = JSON.stringify([auth.role, auth.claims])));
  return key;
}

export class ChangeFeed {
  private readonly subscribers = new Set<ChangeSubscriber>();
  private service: LogicalReplicationService | undefined;
  private ready: Promise<void> | undefined;
  private closed = false;
  private tx: Transaction | undefined;
  /** Delivery runs one transaction at a time, in commit order. */
  private queue: Promise<void> = Promise.resolve();
  private queuedLsn = 0n;
  private confirmedLsn: string | undefined;
  private statusTimer: NodeJS.Timeout | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  private readonly relations = new Map<number, Pgoutput.MessageRelation>();
  private readonly typeNames = new Map<number, string>();
  private readonly tables = new Map<number, Promise<TableInfo>>();

  /** The slot of the current stream: `<prefix>_<random>`, new on every start. */
  private slot = "";

  constructor(
    private readonly project: ProjectRuntime,
    /** `strata_rt_<ref>_<node>`: every slot of this project and node starts with it. */
    private readonly slotPrefix: string,
    private readonly log: Logger,
  ) {}

  /** What the visibility checks (changeChecks.ts) read of this feed. */
  private get checkingFeed(): CheckingFeed {
    return { project: this.project, tableInfo: (oid) => this.tableInfo(oid), log: this.log };
  }

  /** Adds a subscriber; resolves once the slot exists (every later commit reaches it). */
  async add(sub: ChangeSubscriber): Promise<void> {
    clearTimeout(this.lingerTimer);
    this.subscribers.add(sub);
    this.ready ??= this.start();
    try {
      await this.ready;
    } catch (e) {
      this.subscribers.delete(sub);
      throw e;
    }
  }

  remove(sub: ChangeSubscriber): void {
    this.subscribers.delete(sub);
    if (this.subscribers.size || this.closed) return;
    clearTimeout(this.lingerTimer);
    this.lingerTimer = setTimeout(() => {
      if (!this.subscribers.size) void this.stop(true);
    }, LINGER_MS);
    this.lingerTimer.unref();
  }

  /** Stops reading; with `drop`, the slot is dropped too (no subscriber, project paused or deleted). */
  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
    await this.stop(true);
  }

  private async stop(drop: boolean): Promise<void> {
    clearTimeout(this.lingerTimer);
    clearInterval(this.statusTimer);
    const service = this.service;
    this.service = undefined;
    this.ready = undefined;
    this.tx = undefined;
    await service?.destroy().catch(() => {});
    if (drop && this.slot) await this.dropSlot(this.slot).catch(() => {});
  }

  private async dropSlot(slot: string): Promise<void> {
    // The walsender may take a moment to release the slot after its connection ended.
    for (let i = 0; i < 30; i++) {
      const { rows } = await this.project.adminPool.query(
        "select active from pg_replication_slots where slot_name = $1",
        [slot],
      );
      if (!rows.length) return;
      if (!rows[0].active) {
        await this.project.adminPool.query("select pg_drop_replication_slot($1)", [slot]);
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** A fresh slot (one left by a crashed process would replay changes made before anyone subscribed). */
  private async start(): Promise<void> {
    const pool = this.project.adminPool;
    const { rows } = await pool.query("select current_setting('wal_level') as wal_level");
    if (rows[0].wal_level !== "logical") {
      throw new Error(
        `postgres_changes need wal_level = logical on the project's database (it is ${rows[0].wal_level})`,
      );
    }
    // Slots this node left behind (a crash) would keep WAL forever.
    const stale = await pool.query(
      "select slot_name from pg_replication_slots where starts_with(slot_name, $1) and not active",
      [`${this.slotPrefix}_`],
    );
    for (const r of stale.rows) await this.dropSlot(r.slot_name).catch(() => {});
    this.slot = `${this.slotPrefix}_${randomBytes(4).toString("hex")}`;
    await pool.query("select pg_create_logical_replication_slot($1, 'pgoutput')", [this.slot]);
    this.queuedLsn = 0n;
    this.confirmedLsn = undefined;
    this.stream();
    this.statusTimer = setInterval(() => this.sendStatus(false), STATUS_MS);
    this.statusTimer.unref();
  }

  private stream(): void {
    if (this.closed || !this.ready) return;
    const service = new LogicalReplicationService(
      { connectionString: this.project.record.adminUrl },
      { acknowledge: { auto: false, timeoutSeconds: 0 } },
    );
    this.service = service;
    this.tx = undefined;
    const plugin = new PgoutputPlugin({ protoVersion: 1, publicationNames: [PUBLICATION] });
    let restarting = false;
    const restart = (e: unknown) => {
      if (restarting || this.service !== service) return;
      restarting = true;
      this.log.warn({ ref: this.project.ref, err: (e as Error)?.message }, "realtime replication restarts");
      void service.destroy().catch(() => {});
      setTimeout(() => {
        if (this.service === service) this.stream();
      }, RESTART_MS).unref();
    };
    service.on("error", restart);
    service.on("data", (_lsn: string, msg: Pgoutput.Message) => this.onMessage(msg));
    service.on("heartbeat", (lsn: string, _ts: number, shouldRespond: boolean) => {
      // Nothing pending: the slot may move past WAL that holds none of our tables' changes.
      if (!this.tx && lsnValue(lsn) >= this.queuedLsn && this.queuedSettled) {
        this.confirmedLsn = lsn;
        this.queuedLsn = lsnValue(lsn);
      }
      if (shouldRespond) this.sendStatus(false);
    });
    // Without a start position the slot resumes at its confirmed LSN; after a pause, past what is queued
    // (the slot's confirmed LSN still moves only with delivery).
    const from = this.resumeFrom;
    this.resumeFrom = undefined;
    (from ? service.subscribe(plugin, this.slot, from) : service.subscribe(plugin, this.slot)).then(
      () => restart(new Error("replication stream ended")),
      (e: unknown) => restart(e),
    );
  }

  private queuedSettled = true;
  private queuedLsnText: string | undefined;
  /** Transactions queued for delivery and not yet delivered. */
  private pending = 0;
  private paused = false;
  /** Where a stream resumed after a pause starts: the last commit already queued. */
  private resumeFrom: string | undefined;

  private sendStatus(ping: boolean): void {
    if (this.confirmedLsn) void this.service?.acknowledge(this.confirmedLsn, ping).catch(() => {});
  }

  private onMessage(msg: Pgoutput.Message): void {
    switch (msg.tag) {
      case "relation":
        // Values stay as PostgreSQL's text; jsonValue converts them by type name.
        for (const c of msg.columns) c.parser = (raw: unknown) => raw;
        this.relations.set(msg.relationOid, msg);
        this.tables.delete(msg.relationOid);
        return;
      case "begin":
        this.tx = { xid: msg.xid, commitTime: msg.commitTime as bigint, changes: [] };
        return;
      case "insert":
      case "update":
      case "delete":
        this.tx?.changes.push(msg);
        return;
      case "commit": {
        const tx = this.tx;
        this.tx = undefined;
        const end = lsnValue(msg.commitEndLsn);
        // After a restart the slot may resend what was already queued.
        if (!tx || end <= this.queuedLsn) return;
        this.queuedLsn = end;
        const lsn = msg.commitEndLsn!;
        this.queuedLsnText = lsn;
        this.queuedSettled = false;
        this.pending++;
        // Checked ahead (a few transactions at once), delivered in commit order.
        const prepared = tx.changes.length ? this.ahead(() => this.prepare(tx)) : undefined;
        prepared?.catch(() => {});
        const queued = (this.queue = this.queue
          .then(() => prepared)
          .then((send) => send?.())
          .catch((e: unknown) =>
            this.log.error({ ref: this.project.ref, err: (e as Error).message }, "realtime delivery failed"),
          )
          .then(() => {
            this.confirmedLsn = lsn;
            this.pending--;
            if (this.queue === queued) this.queuedSettled = true;
            if (this.paused && this.pending <= replicationBackPressure.maxPending / 2) {
              this.paused = false;
              this.resumeFrom = this.queuedLsnText;
              this.stream();
            }
          }));
        if (!this.paused && this.pending >= replicationBackPressure.maxPending) {
          // Stop reading; what follows this commit stays in the slot and is streamed again on resume.
          this.paused = true;
          replicationBackPressure.pauses++;
          const service = this.service;
          this.service = undefined;
          void service?.destroy().catch(() => {});
        }
        return;
      }
      default:
        return;
    }
  }

  private async typeNameOf(oids: number[]): Promise<void> {
    const missing = oids.filter((o) => !this.typeNames.has(o));
    if (!missing.length) return;
    const { rows } = await this.project.adminPool.query(
      "select oid::int as oid, typname from pg_type where oid = any($1::oid[])",
      [missing],
    );
    for (const r of rows) this.typeNames.set(r.oid, r.typname);
  }

  private tableInfo(oid: number): Promise<TableInfo> {
    let info = this.tables.get(oid);
    if (!info) {
      info = this.project.adminPool
        .query(
          `select c.relrowsecurity as rls,
                  coalesce((select json_agg(json_build_object('name', a.attname, 'typeSchema', tn.nspname, 'typeName', t.typname)
                                            order by array_position(i.indkey::int2[], a.attnum))
                              from pg_index i
                              join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
                              join pg_type t on t.oid = a.atttypid
                              join pg_namespace tn on tn.oid = t.typnamespace
                             where i.indrelid = c.oid and i.indisprimary), '[]'::json) as pk
             from pg_class c where c.oid = $1`,
          [oid],
        )
        .then(({ rows }) => ({ rls: !!rows[0]?.rls, pk: rows[0]?.pk ?? [] }));
      info.catch(() => this.tables.delete(oid));
      this.tables.set(oid, info);
    }
    return info;
  }

  /** Transactions being checked at once: each waits on the database, delivery stays in commit order. */
  private checking = 0;
  private readonly waitingToCheck: (() => void)[] = [];

  /** Runs `work` once fewer than CHECK_AHEAD others run, in the order asked. */
  private async ahead<T>(work: () => Promise<T>): Promise<T> {
    if (this.checking >= CHECK_AHEAD) await new Promise<void>((r) => this.waitingToCheck.push(r));
    this.checking++;
    try {
      return await work();
    } finally {
      this.checking--;
      this.waitingToCheck.shift()?.();
    }
  }

  /**
   * Finds who may see what of a transaction (the database checks) and answers the delivery, to run in
   * commit order; a subscriber gone meanwhile gets nothing.
   */
  private async prepare(tx: Transaction): Promise<(() => void) | undefined> {
    if (!this.subscribers.size) return undefined;
    const commitTimestamp = new Date(Number(tx.commitTime / 1000n)).toISOString();
    await this.typeNameOf([
      ...new Set(tx.changes.flatMap((c) => c.relation.columns.map((col) => col.typeOid))),
    ]);

    // Which bindings of which subscriber each change matches.
    const subs = [...this.subscribers];
    const matches = tx.changes.map((change) => {
      const type = change.tag.toUpperCase();
      const { schema, name } = change.relation;
      const record = this.recordOf(change.relation, change.tag === "delete" ? undefined : change.new);
      const old = this.oldOf(change);
      const row = change.tag === "delete" ? old : record;
      const perSub = new Map<ChangeSubscriber, number[]>();
      for (const sub of subs) {
        const ids = matchingIds(sub.bindings, schema, name, type, row);
        if (ids) perSub.set(sub, ids);
      }
      return { change, type, record, old, perSub };
    });

    // Who may see which change: one transaction per distinct role and claims.
    const groups = new Map<string, { auth: RequestAuth; indexes: Set<number> }>();
    matches.forEach((m, i) => {
      for (const sub of m.perSub.keys()) {
        const auth = sub.auth();
        const key = claimsGroupOf(auth);
        let g = groups.get(key);
        if (!g) groups.set(key, (g = { auth, indexes: new Set() }));
        g.indexes.add(i);
      }
    });
    const visible = new Map<string, Visibility>();
    // The wait for the transaction's visibility runs alongside the first check's round trip.
    const visibleSoon =
      groups.size && (await this.needsRowChecks(matches))
        ? untilVisible(this.project.adminPool, tx.xid)
        : undefined;
    visibleSoon?.catch(() => {});
    for (const [key, g] of groups)
      visible.set(key, await visibleTo(this.checkingFeed, g.auth, [...g.indexes], matches, visibleSoon));

    const infos = await Promise.all(matches.map((m) => this.tableInfo(m.change.relation.relationOid)));

    return () => {
      for (const [i, m] of matches.entries()) {
        // What each group sees of the change, encoded once for all its subscribers (null: nothing), and its
        // frame per set of binding ids.
        const encoded = new Map<string, { data: EncodedJson; frames: Map<string, SharedFrame> } | null>();
        for (const [sub, ids] of m.perSub) {
          if (!this.subscribers.has(sub)) continue;
          const key = claimsGroupOf(sub.auth());
          let seen = encoded.get(key);
          if (seen === undefined) {
            const data = this.changeAsSeen(m, i, infos[i], commitTimestamp, visible.get(key));
            encoded.set(key, (seen = data ? { data: EncodedJson.of(data), frames: new Map() } : null));
          }
          if (!seen) continue;
          const idsKey = String(ids);
          let frame = seen.frames.get(idsKey);
          if (!frame) {
            const payload = new EncodedJson(`{"ids":[${idsKey}],"data":${seen.data.json}}`);
            seen.frames.set(idsKey, (frame = new SharedFrame("postgres_changes", payload)));
          }
          sub.deliver(frame);
        }
      }
    };
  }

  /** The change as a group with visibility `seen` gets it: the row, an error, or nothing (undefined). */
  private changeAsSeen(
    m: { change: Change; type: string; record: Record<string, unknown>; old: Record<string, unknown> },
    i: number,
    info: TableInfo,
    commitTimestamp: string,
    seen: Visibility | undefined,
  ): ChangeData | undefined {
    const error = seen?.errors.get(i);
    if (error) {
      // As the platform: the change's table and type with the error, no row.
      const errorData: ChangeData = {
        schema: m.change.relation.schema,
        table: m.change.relation.name,
        commit_timestamp: null,
        type: m.type as ChangeData["type"],
        columns: [],
        record: {},
        errors: [error],
      };
      if (m.change.tag !== "insert") errorData.old_record = {};
      return errorData;
    }
    if (!seen?.visible.has(i)) return undefined;
    const selectable = seen.columns.get(m.change.relation.relationOid);
    const only = (row: Record<string, unknown>) =>
      selectable ? Object.fromEntries(Object.entries(row).filter(([k]) => selectable.has(k))) : row;
    const data: ChangeData = {
      schema: m.change.relation.schema,
      table: m.change.relation.name,
      commit_timestamp: commitTimestamp,
      type: m.type as ChangeData["type"],
      columns: m.change.relation.columns
        .filter((c) => !selectable || selectable.has(c.name))
        .map((c) => ({
          name: c.name,
          type: this.typeNames.get(c.typeOid) ?? String(c.typeOid),
        })),
      errors: null,
    };
    if (m.change.tag !== "delete") data.record = only(m.record);
    if (m.change.tag === "update") data.old_record = only(m.old);
    if (m.change.tag === "delete") {
      // With RLS a deleted row cannot be checked any more: only its primary key is sent.
      data.old_record = only(
        info.rls && info.pk.length
          ? Object.fromEntries(info.pk.filter((c) => c.name in m.old).map((c) => [c.name, m.old[c.name]]))
          : m.old,
      );
    }
    return data;
  }

  /** Whether any change is a row that must be found again under RLS. */
  private async needsRowChecks(matches: { change: Change; perSub: Map<ChangeSubscriber, number[]> }[]) {
    for (const m of matches) {
      if (m.change.tag === "delete" || !m.perSub.size) continue;
      if ((await this.tableInfo(m.change.relation.relationOid)).rls) return true;
    }
    return false;
  }

  private recordOf(relation: Pgoutput.MessageRelation, row: Row | null | undefined): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    if (!row) return out;
    for (const c of relation.columns) {
      const v = row[c.name];
      if (v === undefined) continue;
      out[c.name] = jsonValue(this.typeNames.get(c.typeOid) ?? "", v);
    }
    return out;
  }

  /** The old row as the replica identity gives it; without one, the key columns of the new row. */
  private oldOf(change: Change): Record<string, unknown> {
    if (change.tag === "insert") return {};
    if (change.old) return this.recordOf(change.relation, change.old);
    const keySource = change.key ?? (change.tag === "update" ? change.new : undefined);
    const keyRow: Row = {};
    for (const k of change.relation.keyColumns) if (keySource?.[k] !== undefined) keyRow[k] = keySource[k];
    return this.recordOf(change.relation, keyRow);
  }
}
