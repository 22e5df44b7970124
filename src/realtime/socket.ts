import { createHash } from "node:crypto";
import type { IncomingMessage, Server } from "node:http";
import os from "node:os";
import path from "node:path";
import type { Duplex } from "node:stream";
import { decodeJwt } from "jose";
import { WebSocket, WebSocketServer } from "ws";
import { authenticateBearer, authenticateDataRequest, type RequestAuth } from "../auth/dataAuth";
import type { AppContext } from "../context";
import { GateError, openProject } from "../http/gate";
import type { ProjectRuntime } from "../projects/runtime";
import type { TopicRights } from "./authorize";
import { PoolExhausted, ProjectHub, Session } from "./channels";
import { pruneMessages } from "./database";
import { parseBinding, type PgBinding } from "./filters";
import { decodeFrame, encodeFrame, type Frame, type OutFrame, type SharedFrame, type Vsn } from "./protocol";

/**
 * `/realtime/v1/websocket`: Phoenix channels as realtime-js speaks them (phx_join with the config
 * {broadcast, presence, postgres_changes, private} and an access_token, heartbeat, access_token refreshes,
 * broadcast, presence, phx_leave). The API key is checked when the socket connects; a bad one never gets a
 * socket. Attached to the HTTP server's `upgrade` event.
 */

declare module "../context" {
  interface AppContext {
    /** Realtime's websocket server and channels (absent in CLI commands that serve nothing). */
    realtime?: RealtimeServer;
  }
}

export const WEBSOCKET_PATH = "/realtime/v1/websocket";
/** A subscriber whose socket holds this much unsent data is disconnected instead of buffering more. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;
const MAX_FRAME_BYTES = 1024 * 1024;
/** setTimeout's limit; a token expiring later is checked on its next refresh. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** A client sends a heartbeat every 25-30 s; a socket silent this long is gone and is closed. */
const SILENCE_MS = 60_000;
/** How often the projects open on this node have their old realtime.messages pruned. */
const PRUNE_EVERY_MS = 60 * 60 * 1000;

type Json = Record<string, unknown>;

const NO_RIGHTS: TopicRights = { read: false, write: false, presence: false };
/** Every frame the server sends is text, a shared frame's bytes too. */
const TEXT = { binary: false };

/**
 * Connections written to in this tick, their sockets corked: the frames a tick writes to one socket (a
 * transaction's changes for its channels, the replies to its joins) leave in one write, not one each.
 */
const corked: Connection[] = [];

function uncorkAll(): void {
  for (const c of corked.splice(0)) c.uncork();
}

/** Why a token was refused, as the platform says it: a code (for join replies) and a message. */
interface TokenRefusal {
  code: string;
  message: string;
}

function tokenRefusal(token: string, e: unknown): TokenRefusal {
  let exp: unknown;
  try {
    exp = decodeJwt(token).exp;
  } catch {
    return { code: "MalformedJWT", message: "The token provided is not a valid JWT" };
  }
  const now = Math.floor(Date.now() / 1000);
  if (typeof exp === "number" && exp <= now) {
    return { code: "InvalidJWTToken", message: `Token has expired ${now - exp} seconds ago` };
  }
  const reason = (e as Error).message.replace(/^Invalid JWT: /, "");
  if (/signature/i.test(reason))
    return { code: "JwtSignatureError", message: "Failed to validate JWT signature" };
  return { code: "InvalidJWTToken", message: reason };
}

export class RealtimeServer {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });
  private readonly hubs = new Map<string, ProjectHub>();
  private readonly connections = new Set<Connection>();
  readonly nodeId: string;
  private closed = false;

  private readonly sweeper = setInterval(() => {
    const now = Date.now();
    for (const c of this.connections) if (now - c.lastSeen > SILENCE_MS) c.close(1000, "heartbeat timeout");
  }, SILENCE_MS / 4);

  /**
   * realtime.messages past the platform's retention, pruned in the projects open on this node (those whose
   * requests, migrations or sockets run here, hence those whose database functions send messages).
   */
  private readonly janitor = setInterval(() => void this.prune(), PRUNE_EVERY_MS);

  constructor(readonly ctx: AppContext) {
    this.sweeper.unref();
    this.janitor.unref();
    // Stable across restarts of this node, so a slot a crashed process left is found and replaced.
    this.nodeId = createHash("sha1")
      .update(`${os.hostname()}\u0000${path.resolve(ctx.config.dataDir)}`)
      .digest("hex")
      .slice(0, 10);
  }

  attach(server: Server): void {
    server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      void this.upgrade(req, socket, head);
    });
  }

  /** Says once at start when the main database cannot stream changes (postgres_changes need it). */
  async checkWalLevel(): Promise<void> {
    const { rows } = await this.ctx.platformPool.query("select current_setting('wal_level') as level");
    if (rows[0]?.level !== "logical") {
      this.ctx.log.warn(
        `realtime: wal_level is ${rows[0]?.level}, so postgres_changes are off (broadcast and presence work); set wal_level = logical and restart PostgreSQL to turn them on`,
      );
    }
  }

  hubOf(project: ProjectRuntime): ProjectHub {
    let hub = this.hubs.get(project.ref);
    if (hub && hub.project !== project) {
      // The project's runtime was replaced (restart, pause, secret change): start over on the new one.
      void this.closeProject(project.ref);
      hub = undefined;
    }
    if (!hub) {
      hub = new ProjectHub(
        project,
        `strata_rt_${project.ref}_${this.nodeId}`,
        this.nodeId,
        this.ctx.config.realtimeNodeTimeoutMs,
        this.ctx.log,
      );
      this.hubs.set(project.ref, hub);
      project.onClose(() => this.closeProject(project.ref, project));
      project.events.on("realtime-shutdown", () => void this.closeProject(project.ref, project));
    }
    return hub;
  }

  /** Closes a project's sockets and drops its slot (pause, delete, restart, realtime shutdown). */
  async closeProject(ref: string, runtime?: ProjectRuntime): Promise<void> {
    const hub = this.hubs.get(ref);
    if (!hub || (runtime && hub.project !== runtime)) return;
    this.hubs.delete(ref);
    for (const c of [...this.connections]) if (c.project.ref === ref) c.close(1001, "project restarted");
    await hub.close();
  }

  private async prune(): Promise<void> {
    for (const project of await this.ctx.registry.open()) {
      if (this.closed) return;
      await pruneMessages(project).catch((e: Error) =>
        this.ctx.log.warn({ ref: project.ref, err: e.message }, "pruning realtime.messages failed"),
      );
    }
  }

  /**
   * A stop: every socket gets a close frame at once (1001 going away: realtime-js reconnects, to another node
   * when there is one), upgrades are refused, and each project's feed and slot are dropped.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    clearInterval(this.janitor);
    for (const c of [...this.connections]) c.close(1001, "server shutting down");
    this.wss.close();
    await Promise.all([...this.hubs.keys()].map((ref) => this.closeProject(ref)));
  }

  /** Cuts the sockets whose clients have not answered their close frame (a stop's grace is over). */
  terminate(): void {
    for (const ws of this.wss.clients) ws.terminate();
  }

  forget(c: Connection): void {
    if (this.connections.delete(c) && c.counted) c.counted.connections--;
  }

  /** A PATCH of the project's realtime config: this node applies it now, the others within a second. */
  forgetConfig(ref: string): void {
    this.hubs.get(ref)?.forgetConfig();
  }

  /** POST /v1/projects/{ref}/config/realtime/shutdown: closes the project's sockets on every node. */
  async shutdown(project: ProjectRuntime): Promise<void> {
    const hub = this.hubOf(project);
    await hub.shutdownOthers().catch(() => {});
    await this.closeProject(project.ref);
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    // Node's HTTP server drops its own error listener at an upgrade: a client (or proxy) resetting the
    // connection while the project and key are checked would otherwise be an uncaught error.
    socket.on("error", () => socket.destroy());
    const url = new URL(req.url ?? "/", "http://localhost");
    const refuse = (status: number, message: string) => {
      const body = JSON.stringify({ message });
      socket.end(
        `HTTP/1.1 ${status} ${status === 404 ? "Not Found" : status === 503 ? "Service Unavailable" : "Forbidden"}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    };
    if (url.pathname.replace(/\/$/, "") !== WEBSOCKET_PATH) return refuse(404, "Not found");
    if (this.closed) return refuse(503, "Server is shutting down");
    let project: ProjectRuntime;
    let auth: RequestAuth;
    const header = req.headers.apikey;
    const apikey = url.searchParams.get("apikey") ?? (Array.isArray(header) ? header[0] : header);
    try {
      project = await openProject(this.ctx, req);
      auth = await authenticateDataRequest(project, { apikey, authorization: undefined });
    } catch (e) {
      if (e instanceof GateError) return refuse(e.status === 401 ? 403 : e.status, e.message);
      return refuse(403, (e as Error).message);
    }
    const vsn: Vsn = url.searchParams.get("vsn") === "2.0.0" ? "2.0.0" : "1.0.0";
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const c = new Connection(this, ws, socket, project, auth, apikey ?? "", vsn);
      this.connections.add(c);
      c.counted = this.hubOf(project);
      c.counted.connections++;
      // A socket is one realtime request in the project's usage (the broadcast API's requests count too).
      this.ctx.usage?.record(project.ref, "realtime");
    });
  }
}

class Connection {
  private readonly sessions = new Map<string, Session>();
  /** The hub whose connection count includes this socket. */
  counted: ProjectHub | undefined;
  lastSeen = Date.now();
  private readonly pending = new Map<string, Promise<void>>();
  private isCorked = false;

  constructor(
    private readonly server: RealtimeServer,
    private readonly ws: WebSocket,
    /** The upgraded connection `ws` writes to (corked while a tick writes frames). */
    private readonly socket: Duplex,
    readonly project: ProjectRuntime,
    private readonly keyAuth: RequestAuth,
    private readonly apikey: string,
    private readonly vsn: Vsn,
  ) {
    ws.on("message", (data: Buffer, isBinary: boolean) => {
      this.lastSeen = Date.now();
      const frame = decodeFrame(
        Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer),
        isBinary,
        vsn,
      );
      if (!frame) return;
      // A topic's frames are handled in order (a leave right after a join waits for the join).
      const previous = this.pending.get(frame.topic) ?? Promise.resolve();
      const next = previous
        .then(() => this.onFrame(frame))
        .catch((e: Error) =>
          server.ctx.log.warn({ ref: project.ref, err: e.message }, "realtime frame failed"),
        )
        .finally(() => {
          if (this.pending.get(frame.topic) === next) this.pending.delete(frame.topic);
        });
      this.pending.set(frame.topic, next);
    });
    ws.on("close", () => this.cleanup());
    ws.on("error", () => this.cleanup());
  }

  private hubRef: ProjectHub | undefined;

  private get hub(): ProjectHub {
    return (this.hubRef ??= this.server.hubOf(this.project));
  }

  send(frame: OutFrame): void {
    this.write(encodeFrame(frame, this.vsn));
  }

  sendShared(frame: SharedFrame, topic: string): void {
    this.write(frame.bytes(topic, this.vsn));
  }

  private write(data: string | Buffer): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (this.ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      // A subscriber that does not read: drop it rather than hold ever more frames for it.
      this.ws.terminate();
      return;
    }
    if (!this.isCorked) {
      this.isCorked = true;
      this.socket.cork();
      if (corked.push(this) === 1) process.nextTick(uncorkAll);
    }
    this.ws.send(data, TEXT);
  }

  uncork(): void {
    this.isCorked = false;
    this.socket.uncork();
  }

  close(code: number, reason: string): void {
    this.cleanup();
    this.ws.close(code, reason);
  }

  private cleanup(): void {
    this.server.forget(this);
    for (const s of this.sessions.values()) this.hubRef?.remove(s);
    this.sessions.clear();
  }

  private reply(frame: Frame, status: "ok" | "error", response: Json): void {
    this.send({
      join_ref: frame.join_ref,
      ref: frame.ref,
      topic: frame.topic,
      event: "phx_reply",
      payload: { status, response },
    });
  }

  private async onFrame(frame: Frame): Promise<void> {
    if (frame.topic === "phoenix") {
      if (frame.event === "heartbeat") this.reply(frame, "ok", {});
      return;
    }
    if (frame.event === "phx_join") return this.join(frame);
    const session = this.sessions.get(frame.topic);
    if (!session) {
      if (frame.event !== "phx_leave") this.reply(frame, "error", { reason: "unmatched topic" });
      else this.reply(frame, "ok", {});
      return;
    }
    switch (frame.event) {
      case "phx_leave":
        this.drop(session);
        this.reply(frame, "ok", {});
        session.push("phx_close", {});
        return;
      case "access_token":
        return this.refresh(session, frame.payload.access_token);
      case "broadcast":
        return this.broadcast(session, frame);
      case "presence":
        return this.presence(session, frame);
      default:
        return;
    }
  }

  private drop(session: Session): void {
    if (this.sessions.get(session.topic) === session) this.sessions.delete(session.topic);
    this.hub.remove(session);
  }

  /** Closes a channel with a `system` error, as the platform does for an expired or refused token. */
  private closeChannel(session: Session, message: string): void {
    session.system("system", "error", message);
    this.drop(session);
    session.push("phx_close", {});
  }

  private async authOf(token: unknown): Promise<RequestAuth | TokenRefusal> {
    if (typeof token !== "string" || token === "" || token === this.apikey) return this.keyAuth;
    try {
      return await authenticateBearer(this.project, token, this.keyAuth.role);
    } catch (e) {
      return tokenRefusal(token, e);
    }
  }

  private watchExpiry(session: Session): void {
    clearTimeout(session.expiry);
    const exp = session.currentAuth.claims.exp;
    if (typeof exp !== "number") return;
    const ms = exp * 1000 - Date.now();
    if (ms > MAX_TIMER_MS) return;
    session.expiry = setTimeout(
      () => this.closeChannel(session, "Token has expired 0 seconds ago"),
      Math.max(ms, 0),
    );
    session.expiry.unref();
  }

  private async join(frame: Frame): Promise<void> {
    const payload = frame.payload;
    const config = (payload.config && typeof payload.config === "object" ? payload.config : {}) as Json;
    const previous = this.sessions.get(frame.topic);
    if (previous) {
      this.drop(previous);
      previous.push("phx_close", {});
    }
    const auth = await this.authOf(payload.access_token);
    if ("code" in auth) return this.reply(frame, "error", { reason: `${auth.code}: ${auth.message}` });

    const rawBindings = Array.isArray(config.postgres_changes) ? config.postgres_changes : [];
    const bindings: PgBinding[] = [];
    for (const raw of rawBindings) {
      const b = parseBinding(raw);
      if (typeof b === "string") return this.reply(frame, "error", { reason: b });
      bindings.push(b);
    }
    const broadcast = (config.broadcast ?? {}) as Json;
    const presence = (config.presence ?? {}) as Json;
    const isPrivate = config.private === true;
    const hub = this.hub;
    const limits = await hub.config();
    const refusal = limits.suspend
      ? "RealtimeDisabledForTenant: Realtime disabled for this tenant"
      : limits.private_only && !isPrivate
        ? "PrivateOnly: This project only allows private channels"
        : this.sessions.size >= limits.max_channels_per_client
          ? "ChannelRateLimitReached: Too many channels"
          : hub.allConnections > limits.max_concurrent_users
            ? "ConnectionRateLimitReached: Too many connected users"
            : !hub.allow("join", limits.max_joins_per_second)
              ? "ClientJoinRateLimitReached: Too many joins per second"
              : undefined;
    if (refusal) return this.reply(frame, "error", { reason: refusal });
    const session = new Session(
      this,
      frame.topic,
      frame.join_ref,
      isPrivate,
      broadcast.self === true,
      broadcast.ack === true,
      typeof presence.key === "string" ? presence.key : undefined,
      auth,
    );
    if (isPrivate) {
      const rights = await hub.authorize(auth, session.subTopic).catch((e: Error) => e);
      if (rights instanceof PoolExhausted) return this.reply(frame, "error", { reason: rights.message });
      if (rights instanceof Error || !rights.read) {
        return this.reply(frame, "error", {
          reason: `Unauthorized: You do not have permissions to read from this Channel topic: ${session.subTopic}`,
        });
      }
      session.canWrite = rights.write;
      session.canTrack = rights.presence;
    }
    await hub.linked();
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (typeof payload.access_token === "string") session.token = payload.access_token;
    this.sessions.set(frame.topic, session);
    hub.add(session);
    this.reply(frame, "ok", { postgres_changes: bindings.map((b) => ({ id: b.id, ...b.echo })) });
    if (presence.enabled === true) {
      const state = await hub.presenceState(session.key).catch((e: Error) => {
        this.server.ctx.log.warn(
          { ref: this.project.ref, err: e.message },
          "realtime presence state unavailable",
        );
        return {};
      });
      session.push("presence_state", state);
    }
    this.watchExpiry(session);
    if (bindings.length) {
      session.bindings = bindings;
      hub.feed.add(session).then(
        () => {
          if (this.sessions.get(frame.topic) === session)
            session.system("postgres_changes", "ok", "Subscribed to PostgreSQL");
        },
        (e: Error) => {
          this.server.ctx.log.warn({ ref: this.project.ref, err: e.message }, "realtime changes unavailable");
          session.system("postgres_changes", "error", e.message);
        },
      );
    }
  }

  private async refresh(session: Session, token: unknown): Promise<void> {
    // As the platform: no token, an opaque key or the same token changes nothing.
    if (typeof token !== "string" || token.startsWith("sb_") || token === session.token) return;
    const auth = await this.authOf(token);
    if ("code" in auth) return this.closeChannel(session, auth.message);
    session.token = token;
    if (session.isPrivate) {
      const rights = await this.hub.authorize(auth, session.subTopic).catch(() => NO_RIGHTS);
      if (!rights.read) {
        return this.closeChannel(
          session,
          `You no longer have permission to read from this Channel topic: ${session.subTopic}`,
        );
      }
      session.canWrite = rights.write;
      session.canTrack = rights.presence;
    }
    session.currentAuth = auth;
    this.watchExpiry(session);
  }

  private async broadcast(session: Session, frame: Frame): Promise<void> {
    const p = frame.payload;
    const limits = await this.hub.config();
    const bytes = Buffer.byteLength(JSON.stringify(p.payload ?? {}));
    const refusal =
      bytes > limits.max_payload_size_in_kb * 1024
        ? "PayloadTooLarge: the payload exceeds max_payload_size_in_kb"
        : !this.hub.allow("event", limits.max_events_per_second)
          ? "ClientRateLimitReached: Too many messages per second"
          : !this.hub.allow("bytes", limits.max_bytes_per_second, bytes)
            ? "ClientRateLimitReached: Too many bytes per second"
            : undefined;
    if (refusal) {
      if (session.ack) this.reply(frame, "error", { reason: refusal });
      return;
    }
    if (typeof p.event !== "string") {
      if (session.ack) this.reply(frame, "error", { reason: "a broadcast needs an event" });
      return;
    }
    if (session.isPrivate && !session.canWrite) {
      if (session.ack) {
        this.reply(frame, "error", {
          reason: `Unauthorized: You do not have permissions to write to this Channel topic: ${session.subTopic}`,
        });
      }
      return;
    }
    const message: Json = { type: "broadcast", event: p.event, payload: p.payload ?? {} };
    if (p.meta !== undefined) message.meta = p.meta;
    this.hub.broadcast(session.key, message, session);
    if (session.ack) this.reply(frame, "ok", {});
  }

  private async presence(session: Session, frame: Frame): Promise<void> {
    const p = frame.payload;
    const limits = await this.hub.config();
    if (!limits.presence_enabled) {
      return this.reply(frame, "error", {
        reason: "PresenceDisabled: presence is disabled for this project",
      });
    }
    if (!this.hub.allow("presence", limits.max_presence_events_per_second)) {
      return this.reply(frame, "error", {
        reason: "PresenceRateLimitReached: Too many presence messages per second",
      });
    }
    if (session.isPrivate && !session.canTrack) {
      return this.reply(frame, "error", {
        reason: `Unauthorized: You do not have permissions to track presence on this Channel topic: ${session.subTopic}`,
      });
    }
    if (p.event === "track") {
      if (!p.payload || typeof p.payload !== "object" || Array.isArray(p.payload)) {
        return this.reply(frame, "error", { reason: "Presence track payload must be a map" });
      }
      const text = JSON.stringify(p.payload);
      const bytes = Buffer.byteLength(text);
      // As the platform: an oversized track closes the channel; the same payload again changes nothing.
      if (bytes > limits.max_payload_size_in_kb * 1024)
        return this.closeChannel(session, "Track message size exceeded");
      if (text === session.tracked) return this.reply(frame, "ok", {});
      if (!this.hub.allow("bytes", limits.max_bytes_per_second, bytes)) {
        return this.reply(frame, "error", {
          reason: "PresenceRateLimitReached: Too many bytes per second",
        });
      }
      session.tracked = text;
      this.hub.track(session, p.payload as Json);
      this.reply(frame, "ok", {});
    } else if (p.event === "untrack") {
      session.tracked = undefined;
      this.hub.untrack(session);
      this.reply(frame, "ok", {});
    } else {
      this.reply(frame, "error", { reason: "presence event must be track or untrack" });
    }
  }
}
