import { randomUUID } from "node:crypto";
import pg from "pg";
import type { RequestAuth } from "../auth/dataAuth";
import { realtimeConfigOf, type RealtimeConfig } from "../catalog/realtimeConfig";
import type { Logger } from "../log";
import type { ProjectRuntime } from "../projects/runtime";
import { ChangeFeed, type ChangeData, type ChangeSubscriber } from "./changes";
import type { PgBinding } from "./filters";
import { PresenceState, type PresenceDiff } from "./presence";
import type { Frame } from "./protocol";

/**
 * The channels of one project on this node: who joined which topic, their presence, the project's change
 * feed, and the LISTEN/NOTIFY link that carries broadcasts between Strata nodes of one installation.
 */

/** Where a session's frames go: its socket. */
export interface Outbound {
  send(frame: Frame): void;
}

const NOTIFY_CHANNEL = "strata_realtime";
/** pg_notify refuses payloads of 8000 bytes or more. */
const NOTIFY_MAX = 7900;
const CONFIG_TTL_MS = 1000;

export class Session implements ChangeSubscriber {
  readonly id = randomUUID();
  bindings: PgBinding[] = [];
  canWrite = true;
  canTrack = true;
  presenceKey: string;
  expiry: NodeJS.Timeout | undefined;
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

  push(event: string, payload: Record<string, unknown>, ref: string | null = null): void {
    this.out.send({ join_ref: this.joinRef, ref, topic: this.topic, event, payload });
  }

  deliver(ids: number[], data: ChangeData): void {
    this.push("postgres_changes", { ids, data: data as unknown as Record<string, unknown> });
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
  private listener: pg.Client | undefined;
  private closed = false;
  private configCache: { at: number; value: Promise<RealtimeConfig> } | undefined;
  private readonly windows = new Map<string, { second: number; count: number }>();
  /** Sockets of this project on this node. */
  connections = 0;

  constructor(
    readonly project: ProjectRuntime,
    slotPrefix: string,
    private readonly nodeId: string,
    private readonly log: Logger,
  ) {
    this.feed = new ChangeFeed(project, slotPrefix, log);
    void this.listen();
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

  /** Counts one event of `kind` in the current second; false once `limit` is reached. */
  allow(kind: string, limit: number): boolean {
    const second = Math.floor(Date.now() / 1000);
    let w = this.windows.get(kind);
    if (!w || w.second !== second) this.windows.set(kind, (w = { second, count: 0 }));
    if (w.count >= limit) return false;
    w.count++;
    return true;
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

  presenceState(key: string): Record<string, unknown> {
    return this.presence.get(key)?.state() ?? {};
  }

  track(session: Session, payload: Record<string, unknown>): void {
    let state = this.presence.get(session.key);
    if (!state) this.presence.set(session.key, (state = new PresenceState()));
    this.sendDiff(session.key, state.track(session.id, session.presenceKey, payload));
  }

  untrack(session: Session): void {
    const state = this.presence.get(session.key);
    const diff = state?.untrack(session.id);
    if (state && !state.size) this.presence.delete(session.key);
    if (diff) this.sendDiff(session.key, diff);
  }

  private sendDiff(key: string, diff: PresenceDiff): void {
    for (const s of this.topics.get(key) ?? [])
      s.push("presence_diff", diff as unknown as Record<string, unknown>);
  }

  /** A broadcast to every session of the topic on every node (`from` is skipped unless it asked for self). */
  broadcast(key: string, message: Record<string, unknown>, from?: Session): void {
    this.deliverLocal(key, message, from);
    const payload = JSON.stringify({ node: this.nodeId, key, message });
    if (Buffer.byteLength(payload) < NOTIFY_MAX) {
      this.project.adminPool
        .query("select pg_notify($1, $2)", [NOTIFY_CHANNEL, payload])
        .catch((e: Error) =>
          this.log.warn({ ref: this.project.ref, err: e.message }, "realtime notify failed"),
        );
    }
  }

  private deliverLocal(key: string, message: Record<string, unknown>, from?: Session): void {
    for (const s of this.topics.get(key) ?? []) {
      if (s === from && !s.self) continue;
      s.push("broadcast", message);
    }
  }

  /** Broadcasts of the other nodes, through LISTEN on the project's database. Reconnects when lost. */
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
      try {
        const { node, key, message, shutdown } = JSON.parse(msg.payload ?? "");
        if (node === this.nodeId) return;
        if (shutdown === true) this.project.events.emit("realtime-shutdown");
        else if (typeof key === "string") this.deliverLocal(key, message);
      } catch {
        // Not one of ours.
      }
    });
    try {
      await client.connect();
      await client.query(`listen ${NOTIFY_CHANNEL}`);
    } catch {
      retry();
    }
  }

  /** Tells the other nodes to close this project's sockets (Management API shutdown). */
  async shutdownOthers(): Promise<void> {
    await this.project.adminPool.query("select pg_notify($1, $2)", [
      NOTIFY_CHANNEL,
      JSON.stringify({ node: this.nodeId, shutdown: true }),
    ]);
  }

  async close(): Promise<void> {
    this.closed = true;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => {});
    await this.feed.close();
  }
}
