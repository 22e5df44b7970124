import { randomUUID } from "node:crypto";
import pg from "pg";
import type { RequestAuth } from "../auth/dataAuth";
import { realtimeConfigOf, type RealtimeConfig } from "../catalog/realtimeConfig";
import type { Logger } from "../log";
import { CATALOG_ONLY_SESSION } from "../db/client";
import type { ProjectRuntime } from "../projects/runtime";
import { ChangeFeed, type ChangeSubscriber } from "./changes";
import type { PgBinding } from "./filters";
import { authorizeTopic, type TopicRights } from "./authorize";
import { NodeLink } from "./cluster";
import { messageOf } from "./database";
import { PresenceState, type Metas, type PresenceDiff } from "./presence";
import { EncodedJson, SharedFrame, type OutFrame } from "./protocol";

/**
 * The channels of one project on this node: who joined which topic, their presence, the project's change
 * feed, and the link (cluster.ts) that shares broadcasts, presence and socket counts with the other Strata
 * nodes of the installation.
 */

/** Where a session's frames go: its socket. */
export interface Outbound {
  send(frame: OutFrame): void;
  /** A frame the topic's other subscribers get alike, encoded once for all of them. */
  sendShared(frame: SharedFrame, topic: string): void;
}

const CONFIG_TTL_MS = 1000;
/** How long an authorization check waits for one of the `connection_pool` connections. */
const AUTH_POOL_WAIT_MS = 5000;

/** No connection of the realtime authorization pool became free in time (the platform's words). */
export class PoolExhausted extends Error {
  constructor() {
    super("IncreaseConnectionPool: Please increase your connection pool size");
  }
}

export class Session implements ChangeSubscriber {
  readonly id = randomUUID();
  bindings: PgBinding[] = [];
  canWrite = true;
  canTrack = true;
  presenceKey: string;
  expiry: NodeJS.Timeout | undefined;
  /** The JSON of the presence payload this session tracks. */
  tracked: string | undefined;
  /** The access token the channel's auth came from (a refresh with the same one changes nothing). */
  token: string | undefined;

  constructor(
    readonly out: Outbound,
    readonly topic: string,
    readonly joinRef: string | null,
    readonly isPrivate: boolean,
    readonly self: boolean,
    readonly ack: boolean,
    presenceKey: string | undefined,
    public currentAuth: RequestAuth,
  ) {
    this.presenceKey = presenceKey || randomUUID();
  }

  /** The topic without its `realtime:` prefix, as the platform names a channel. */
  get subTopic(): string {
    return this.topic.replace(/^realtime:/, "");
  }

  /** Private and public channels of one name are apart, as on the platform. */
  get key(): string {
    return topicKey(this.subTopic, this.isPrivate);
  }

  auth(): RequestAuth {
    return this.currentAuth;
  }

  push(event: string, payload: Record<string, unknown> | EncodedJson, ref: string | null = null): void {
    this.out.send({ join_ref: this.joinRef, ref, topic: this.topic, event, payload });
  }

  /** A frame every subscriber of the topic gets alike (broadcast, presence diff, change). */
  deliver(frame: SharedFrame): void {
    this.out.sendShared(frame, this.topic);
  }

  system(extension: string, status: "ok" | "error", message: string): void {
    this.push("system", { message, status, extension, channel: this.subTopic });
  }
}

export function topicKey(subTopic: string, isPrivate: boolean): string {
  return `${isPrivate ? "private" : "public"}:${subTopic}`;
}

export class ProjectHub {
  private readonly topics = new Map<string, Set<Session>>();
  private readonly presence = new Map<string, PresenceState>();
  readonly feed: ChangeFeed;
  /** The other nodes of the installation: broadcasts, presence, socket counts. */
  readonly link: NodeLink;
  private configCache: { at: number; value: Promise<RealtimeConfig> } | undefined;
  private readonly windows = new Map<string, { second: number; count: number }>();
  /** Sockets of this project on this node. */
  connections = 0;
  /** Messages from the database are delivered one after another, in the order they were announced. */
  private fromDatabase: Promise<void> = Promise.resolve();

  constructor(
    readonly project: ProjectRuntime,
    slotPrefix: string,
    nodeId: string,
    nodeTimeoutMs: number,
    private readonly log: Logger,
  ) {
    this.feed = new ChangeFeed(project, slotPrefix, log);
    this.link = new NodeLink(project, nodeId, nodeTimeoutMs, log, {
      broadcast: (key, message) => this.deliverLocal(key, message),
      database: (announcement) => this.deliverFromDatabase(announcement),
      diff: (key, diff) => this.sendDiff(key, diff),
      shutdown: () => this.project.events.emit("realtime-shutdown"),
      presences: () => this.localPresences(),
      connections: () => this.connections,
    });
  }

  /** Settles once this node hears the other nodes' messages of the project (see NodeLink.listening). */
  linked(): Promise<void> {
    return this.link.listening;
  }

  /** The project's realtime config, read again when older than a second (a PATCH applies within one). */
  config(): Promise<RealtimeConfig> {
    const now = Date.now();
    if (!this.configCache || now - this.configCache.at > CONFIG_TTL_MS) {
      const value = realtimeConfigOf(this.project.platformPool, this.project.ref);
      value.catch(() => (this.configCache = undefined));
      this.configCache = { at: now, value };
    }
    return this.configCache.value;
  }

  forgetConfig(): void {
    this.configCache = undefined;
  }

  /** What `kind` counted in the current second. */
  used(kind: string): number {
    const w = this.windows.get(kind);
    return w && w.second === Math.floor(Date.now() / 1000) ? w.count : 0;
  }

  /** Counts `amount` (default one event) of `kind` in the current second; false once `limit` is reached. */
  allow(kind: string, limit: number, amount = 1): boolean {
    const second = Math.floor(Date.now() / 1000);
    let w = this.windows.get(kind);
    if (!w || w.second !== second) this.windows.set(kind, (w = { second, count: 0 }));
    if (w.count + amount > limit) return false;
    w.count += amount;
    return true;
  }

  private authPoolInstance: pg.Pool | undefined;

  /** Checks under way, by topic, role and claims: joins that arrive together share one. */
  private readonly checks = new Map<string, Promise<TopicRights>>();

  /**
   * Checks a private topic's policies on the project's realtime authorization pool, whose size is the
   * config's `connection_pool` (per node, resized live), as the platform's tenant pool for these checks.
   * Callers asking the same question (topic, role, claims) while it is being checked get its answer: many
   * subscribers of one channel joining at once cost one check, not one each.
   */
  authorize(auth: RequestAuth, topic: string): Promise<TopicRights> {
    const key = JSON.stringify([topic, auth.role, auth.claims]);
    let check = this.checks.get(key);
    if (!check) {
      check = this.checkTopic(auth, topic).finally(() => this.checks.delete(key));
      this.checks.set(key, check);
    }
    return check;
  }

  private async checkTopic(auth: RequestAuth, topic: string): Promise<TopicRights> {
    const size = (await this.config()).connection_pool;
    if (!this.authPoolInstance) {
      this.authPoolInstance = new pg.Pool({
        // The project's SQL login, not the superuser: the policies checked on it are the tenant's code.
        connectionString: this.project.record.sqlUrl,
        options: CATALOG_ONLY_SESSION,
        max: size,
        connectionTimeoutMillis: AUTH_POOL_WAIT_MS,
        idleTimeoutMillis: 30_000,
        application_name: "strata realtime authorization",
      });
      this.authPoolInstance.on("error", () => {});
    }
    // pg-pool reads `max` whenever it needs a connection, so a PATCH applies to the next check.
    (this.authPoolInstance.options as { max: number }).max = size;
    try {
      return await authorizeTopic(this.authPoolInstance, this.project.record.ownerRole, auth, topic);
    } catch (e) {
      if (/timeout exceeded when trying to connect/i.test((e as Error).message)) throw new PoolExhausted();
      throw e;
    }
  }

  /** Sockets of the project on every live node (the others' as of their last heartbeat). */
  get allConnections(): number {
    return this.connections + this.link.othersConnections;
  }

  get sessions(): number {
    let n = 0;
    for (const s of this.topics.values()) n += s.size;
    return n;
  }

  add(session: Session): void {
    let set = this.topics.get(session.key);
    if (!set) this.topics.set(session.key, (set = new Set()));
    set.add(session);
  }

  remove(session: Session): void {
    clearTimeout(session.expiry);
    const set = this.topics.get(session.key);
    set?.delete(session);
    if (set && !set.size) this.topics.delete(session.key);
    if (session.bindings.length) this.feed.remove(session);
    this.untrack(session);
  }

  /** The topic's presences on this node and the other live nodes. */
  async presenceState(key: string): Promise<Metas> {
    const state = await this.link.othersState(key);
    for (const [k, { metas }] of Object.entries(this.presence.get(key)?.state() ?? {}))
      (state[k] ??= { metas: [] }).metas.push(...metas);
    return state;
  }

  private localPresences(): {
    session: string;
    key: string;
    presenceKey: string;
    meta: Record<string, unknown>;
  }[] {
    const out = [];
    for (const [key, state] of this.presence)
      for (const e of state.list()) out.push({ session: e.sessionId, key, presenceKey: e.key, meta: e.meta });
    return out;
  }

  track(session: Session, payload: Record<string, unknown>): void {
    let state = this.presence.get(session.key);
    if (!state) this.presence.set(session.key, (state = new PresenceState()));
    const diff = state.track(session.id, session.presenceKey, payload);
    this.sendDiff(session.key, diff);
    const meta = diff.joins[session.presenceKey].metas[0];
    this.link.track(session.id, session.key, session.presenceKey, meta, diff);
  }

  untrack(session: Session): void {
    const state = this.presence.get(session.key);
    const diff = state?.untrack(session.id);
    if (state && !state.size) this.presence.delete(session.key);
    if (!diff) return;
    this.sendDiff(session.key, diff);
    this.link.untrack(session.id, session.key, diff);
  }

  private sendDiff(key: string, diff: PresenceDiff): void {
    const sessions = this.topics.get(key);
    if (!sessions) return;
    const frame = new SharedFrame("presence_diff", EncodedJson.of(diff));
    for (const s of sessions) s.deliver(frame);
  }

  /** A broadcast to every session of the topic on every node (`from` is skipped unless it asked for self). */
  broadcast(key: string, message: Record<string, unknown>, from?: Session): void {
    this.deliverLocal(key, message, from);
    this.link.broadcast(key, message);
  }

  private deliverLocal(key: string, message: Record<string, unknown>, from?: Session): void {
    const sessions = this.topics.get(key);
    if (!sessions) return;
    const frame = new SharedFrame("broadcast", EncodedJson.of(message));
    for (const s of sessions) {
      if (s === from && !s.self) continue;
      s.deliver(frame);
    }
  }

  /**
   * A message realtime.send stored (./database.ts), to the topic's subscribers on this node as the platform
   * sends it: `{type: "broadcast", event, payload, meta: {id}}`, dropped when its payload exceeds the project's
   * max_payload_size_in_kb. A private message goes to the private channel only, whose sessions the RLS
   * policies on realtime.messages let in.
   */
  private deliverFromDatabase(announcement: Record<string, unknown>): void {
    const { topic, private: isPrivate } = announcement;
    // Nobody here subscribes to it: nothing to do (a message announced by id must be read to know).
    if (
      typeof topic === "string" &&
      typeof isPrivate === "boolean" &&
      !this.topics.has(topicKey(topic, isPrivate))
    )
      return;
    this.fromDatabase = this.fromDatabase
      .then(async () => {
        const m = await messageOf(this.project, announcement);
        if (!m) return;
        const limits = await this.config();
        if (Buffer.byteLength(JSON.stringify(m.payload)) > limits.max_payload_size_in_kb * 1024) return;
        this.deliverLocal(topicKey(m.topic, m.private), {
          type: "broadcast",
          event: m.event,
          payload: m.payload,
          meta: { id: m.id },
        });
      })
      .catch((e: Error) =>
        this.log.warn({ ref: this.project.ref, err: e.message }, "realtime message from the database lost"),
      );
  }

  /** Tells the other nodes to close this project's sockets (Management API shutdown). */
  shutdownOthers(): Promise<void> {
    return this.link.shutdown();
  }

  async close(): Promise<void> {
    await this.link.close();
    await this.feed.close();
    await this.authPoolInstance?.end().catch(() => {});
    this.authPoolInstance = undefined;
  }
}
