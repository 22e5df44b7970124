import { withAdminTransaction } from "../db/transaction";
import { randomBytes } from "node:crypto";
import pg from "pg";
import type { Logger } from "../log";
import type { ProjectRuntime } from "../projects/runtime";
import type { Metas, PresenceDiff } from "./presence";

/**
 * One project's link between the Strata nodes of an installation, all on the project's database:
 * - messages (broadcasts, presence diffs, shutdown) go out with NOTIFY on one channel, in the order they were
 *   sent; one too large for NOTIFY's 8000 bytes is stored in `extensions.strata_realtime_relay` and notified by id;
 * - every presence tracked on this node is a row of `extensions.strata_realtime_presences`, written in the same
 *   transaction as its diff's NOTIFY, so a joiner on any node reads the other nodes' presences there;
 * - the node beats in `extensions.strata_realtime_nodes` (with its socket count) every third of the timeout; on each
 *   beat it removes the presences of nodes silent longer than the timeout and sends their leaves. One node
 *   gets each dead row (DELETE ... RETURNING), so each leave is sent once. A node found deleted on its own
 *   beat (it stalled) writes its presences again and sends their joins.
 * - realtime.send announces the messages it stores on the same channel (./database.ts); every node hears them.
 * Limits: delivery between nodes is as reliable as the LISTEN connection (reconnected after a second; what
 * was notified meanwhile is lost, as Phoenix PubSub loses messages over a broken link); a crashed node's
 * presences linger up to the timeout.
 */

type Json = Record<string, unknown>;

const NOTIFY_CHANNEL = "strata_realtime";
/** pg_notify refuses payloads of 8000 bytes or more. */
const NOTIFY_MAX = 7900;
/** Broadcasts sent in one NOTIFY at most (a larger batch is relayed through a row, as a large message). */
const MAX_BATCH = 100;
/** Relayed messages are kept this long for slow listeners, then deleted by a beat. */
const RELAY_KEEP = "1 minute";

export interface LinkHandlers {
  broadcast(key: string, message: Json): void;
  /** A message realtime.send stored in the project's database (./database.ts), announced to every node. */
  database(announcement: Json): void;
  diff(key: string, diff: PresenceDiff): void;
  shutdown(): void;
  /** This node's tracked presences, to be written again after the node was taken for dead. */
  presences(): { session: string; key: string; presenceKey: string; meta: Json }[];
  /** This node's sockets of the project. */
  connections(): number;
}

export class NodeLink {
  /** This process's hub of the project: a new one per start, so a crashed process's rows expire. */
  readonly id: string;
  /** How this node's own messages begin (their first field is its id). */
  private readonly ownPrefix: string;
  /** Sockets of the project on the other live nodes, as of the last beat. */
  othersConnections = 0;
  private listener: pg.Client | undefined;
  /**
   * Settles once the first LISTEN has answered (or failed: reconnects go on behind it). A join waits for it, so
   * a subscriber's first broadcast from another node, sent right after its join was answered, is not missed.
   */
  readonly listening: Promise<void>;
  private closed = false;
  private outbox: Promise<void> = Promise.resolve();
  private inbox: Promise<void> = Promise.resolve();
  private readonly beat: NodeJS.Timeout;

  constructor(
    private readonly project: ProjectRuntime,
    nodeId: string,
    private readonly timeoutMs: number,
    private readonly log: Logger,
    private readonly on: LinkHandlers,
  ) {
    this.id = `${nodeId}-${randomBytes(4).toString("hex")}`;
    this.ownPrefix = `{"node":${JSON.stringify(this.id)},`;
    this.listening = this.listen();
    this.enqueue(() => this.heartbeat());
    this.beat = setInterval(() => this.enqueue(() => this.heartbeat()), Math.max(timeoutMs / 3, 100));
    this.beat.unref();
  }

  /** Runs `work` after everything sent before it (cross-node order is send order). */
  private enqueue(work: () => Promise<void>): Promise<void> {
    // A broadcast sent after this goes after it, not into a batch queued before it.
    this.batch = undefined;
    const next = this.outbox.then(work).catch((e: Error) => {
      if (!this.closed) this.log.warn({ ref: this.project.ref, err: e.message }, "realtime node link failed");
    });
    this.outbox = next;
    return next;
  }

  /** NOTIFY of one message, relayed through a row when too large. `client` sends it in its transaction. */
  private async notify(
    message: Json,
    client: pg.ClientBase | pg.Pool = this.project.adminPool,
  ): Promise<void> {
    // `node` first: receivers know their own messages by it (ownPrefix).
    let payload = JSON.stringify({ node: this.id, ...message });
    if (Buffer.byteLength(payload) >= NOTIFY_MAX) {
      const { rows } = await client.query(
        "insert into extensions.strata_realtime_relay (payload) values ($1) returning id::text",
        [payload],
      );
      payload = JSON.stringify({ node: this.id, relay: rows[0].id });
    }
    await client.query("select pg_notify($1, $2)", [NOTIFY_CHANNEL, payload]);
  }

  /**
   * Broadcasts waiting in the outbox behind the message being sent, as its last item: those sent meanwhile
   * join them, and all go in one NOTIFY (`{batch}`), still in send order, so a busy channel costs one
   * NOTIFY per round trip instead of one per message.
   */
  private batch: { key: string; message: Json }[] | undefined;

  broadcast(key: string, message: Json): void {
    if (this.batch && this.batch.length < MAX_BATCH) {
      this.batch.push({ key, message });
      return;
    }
    const batch = [{ key, message }];
    void this.enqueue(() => {
      if (this.batch === batch) this.batch = undefined;
      return this.notify(batch.length === 1 ? batch[0] : { batch });
    });
    this.batch = batch;
  }

  shutdown(): Promise<void> {
    return this.enqueue(() => this.notify({ shutdown: true }));
  }

  track(session: string, key: string, presenceKey: string, meta: Json, diff: PresenceDiff): void {
    void this.enqueue(() =>
      this.inTransaction(async (client) => {
        await client.query(
          `insert into extensions.strata_realtime_presences (session, node, topic, key, meta) values ($1, $2, $3, $4, $5)
           on conflict (session) do update set node = excluded.node, topic = excluded.topic,
             key = excluded.key, meta = excluded.meta`,
          [session, this.id, key, presenceKey, meta],
        );
        await this.notify({ key, diff }, client);
      }),
    );
  }

  untrack(session: string, key: string, diff: PresenceDiff): void {
    void this.enqueue(() =>
      this.inTransaction(async (client) => {
        await client.query("delete from extensions.strata_realtime_presences where session = $1", [session]);
        await this.notify({ key, diff }, client);
      }),
    );
  }

  /** The presences of `key` tracked on the other live nodes. */
  async othersState(key: string): Promise<Metas> {
    const { rows } = await this.project.adminPool.query(
      `select p.key, p.meta from extensions.strata_realtime_presences p
         join extensions.strata_realtime_nodes n on n.node = p.node
        where p.topic = $1 and p.node <> $2 and n.seen_at >= now() - $3 * interval '1 millisecond'`,
      [key, this.id, this.timeoutMs],
    );
    const out: Metas = {};
    for (const r of rows) (out[r.key] ??= { metas: [] }).metas.push(r.meta);
    return out;
  }

  private async inTransaction(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    await withAdminTransaction(this.project.adminPool, work);
  }

  private async heartbeat(): Promise<void> {
    if (this.closed) return;
    const pool = this.project.adminPool;
    const { rows } = await pool.query(
      `insert into extensions.strata_realtime_nodes (node, seen_at, connections) values ($1, now(), $2)
       on conflict (node) do update set seen_at = now(), connections = excluded.connections
       returning (xmax = 0) as inserted`,
      [this.id, this.on.connections()],
    );
    if (rows[0]?.inserted) {
      // First beat, or the others took this node for dead and removed its presences: write them again.
      for (const p of this.on.presences()) {
        const diff: PresenceDiff = { joins: { [p.presenceKey]: { metas: [p.meta] } }, leaves: {} };
        await this.inTransaction(async (client) => {
          await client.query(
            `insert into extensions.strata_realtime_presences (session, node, topic, key, meta) values ($1, $2, $3, $4, $5)
             on conflict (session) do update set node = excluded.node, meta = excluded.meta`,
            [p.session, this.id, p.key, p.presenceKey, p.meta],
          );
          await this.notify({ key: p.key, diff }, client);
        });
      }
    }
    // Dead nodes' presences, and rows of nodes already gone (a stalled node's late write): one node gets each.
    const gone = await pool.query(
      `with dead as (
         delete from extensions.strata_realtime_nodes where seen_at < now() - $1 * interval '1 millisecond' returning node)
       delete from extensions.strata_realtime_presences p
        where p.node in (select node from dead)
           or not exists (select from extensions.strata_realtime_nodes n where n.node = p.node)
       returning p.topic, p.key, p.meta`,
      [this.timeoutMs],
    );
    const leaves = new Map<string, PresenceDiff>();
    for (const r of gone.rows) {
      let diff = leaves.get(r.topic);
      if (!diff) leaves.set(r.topic, (diff = { joins: {}, leaves: {} }));
      (diff.leaves[r.key] ??= { metas: [] }).metas.push(r.meta);
    }
    for (const [key, diff] of leaves) {
      this.on.diff(key, diff);
      await this.notify({ key, diff });
    }
    const others = await pool.query(
      `select coalesce(sum(connections), 0)::int as n from extensions.strata_realtime_nodes
        where node <> $1 and seen_at >= now() - $2 * interval '1 millisecond'`,
      [this.id, this.timeoutMs],
    );
    this.othersConnections = others.rows[0]?.n ?? 0;
    await pool.query(
      `delete from extensions.strata_realtime_relay where created_at < now() - interval '${RELAY_KEEP}'`,
    );
  }

  /** Messages of the other nodes, handled in the order they arrive. Reconnects when lost. */
  private async listen(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.project.record.adminUrl });
    this.listener = client;
    const retry = () => {
      if (this.listener === client) this.listener = undefined;
      client.end().catch(() => {});
      if (!this.closed) setTimeout(() => void this.listen(), 1000).unref();
    };
    client.on("error", retry);
    client.on("notification", (msg) => {
      this.inbox = this.inbox.then(() => this.receive(msg.payload ?? "")).catch(() => {});
    });
    try {
      await client.connect();
      await client.query(`listen ${NOTIFY_CHANNEL}`);
    } catch {
      retry();
    }
  }

  private async receive(text: string): Promise<void> {
    // This node's own messages come back too: known by their first field, without parsing them.
    if (text.startsWith(this.ownPrefix)) return;
    let m: Json;
    try {
      m = JSON.parse(text) as Json;
    } catch {
      return; // Not one of ours.
    }
    if (this.closed) return;
    if (m.db && typeof m.db === "object") return this.on.database(m.db as Json);
    if (m.node === this.id) return;
    if (typeof m.relay === "string") {
      const { rows } = await this.project.adminPool.query(
        "select payload from extensions.strata_realtime_relay where id = $1",
        [m.relay],
      );
      if (rows[0]) await this.receive(rows[0].payload);
      return;
    }
    if (m.shutdown === true) return this.on.shutdown();
    if (Array.isArray(m.batch)) {
      for (const b of m.batch as Json[])
        if (typeof b.key === "string" && b.message && typeof b.message === "object")
          this.on.broadcast(b.key, b.message as Json);
      return;
    }
    if (typeof m.key !== "string") return;
    if (m.diff && typeof m.diff === "object") this.on.diff(m.key, m.diff as PresenceDiff);
    else if (m.message && typeof m.message === "object") this.on.broadcast(m.key, m.message as Json);
  }

  /** Removes this node's presences (sending their leaves to the others) and its heartbeat row. */
  async close(): Promise<void> {
    clearInterval(this.beat);
    await this.enqueue(async () => {
      const gone = await this.project.adminPool.query(
        "delete from extensions.strata_realtime_presences where node = $1 returning topic, key, meta",
        [this.id],
      );
      for (const r of gone.rows)
        await this.notify({ key: r.topic, diff: { joins: {}, leaves: { [r.key]: { metas: [r.meta] } } } });
      await this.project.adminPool.query("delete from extensions.strata_realtime_nodes where node = $1", [
        this.id,
      ]);
    });
    this.closed = true;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => {});
  }
}
