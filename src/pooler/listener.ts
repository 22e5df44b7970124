import net from "node:net";
import tls from "node:tls";
import type { Duplex, Readable } from "node:stream";
import type { AppContext } from "../context";
import type { Logger } from "../log";
import { banAddress } from "../projects/access";
import type { ProjectRecord } from "../projects/runtime";
import { refusal, withinCidrs } from "./admission";
import { CliStatements } from "./cliStatements";
import { proxiedAddress, proxyHeaderLength } from "./proxyHeader";
import { openOwnerVaultSession, protocolMessage } from "./vaultSession";
import {
  errorCode,
  fatalError,
  firstMessageLength,
  MAX_STARTUP_LENGTH,
  parseFirstMessage,
  ServerMessageReader,
  startupMessage,
  type FirstMessage,
} from "./protocol";

/**
 * The database listener: one TCP port (STRATA_DB_PORT, 5432 by default) where PostgreSQL clients — psql, the
 * CLI's `db push`/`migration list`/`inspect db`, any driver — reach their project's database, as the platform's
 * pooler (Supavisor) and its `db.<ref>.<project host>` names let them. It routes and relays; it pools nothing.
 *
 * The project comes from the user name (`postgres.<ref>`, Supavisor's tenant naming), else from the TLS server
 * name (`db.<ref>.<domain>` or `<ref>.<domain>`, sent by clients that use TLS), else from the database name (the
 * ref). The user becomes a login of that
 * project only: `postgres` is its owner role (`postgres_<ref>`, whose password is the project's db_pass), its
 * temporary CLI and just-in-time logins keep their names; any other role (a superuser, Strata's own logins,
 * another project's roles) is refused before anything reaches PostgreSQL. The database is always the project's.
 *
 * Authentication passes through untouched: the client's SCRAM exchange is with PostgreSQL itself (the listener
 * never sees a password). The listener terminates TLS and talks to the cluster in plain TCP, so PostgreSQL offers
 * SCRAM-SHA-256 without channel binding; a client that requires channel binding cannot connect through it.
 * PostgreSQL sees the listener's loopback address, so the listener applies what pg_hba.conf would by the client's
 * own address (admission.ts) and counts a failed password login against that address (ClusterAccess).
 */

export interface DbListenerOptions {
  port: number;
  /** The address to listen on (all when undefined). */
  host?: string;
  secureContext: tls.SecureContext;
}

export interface DbListener {
  /** The port it listens on. */
  port: number;
  close(): Promise<void>;
}

/** How long a client has to send its startup message (and finish the TLS handshake). */
const STARTUP_TIMEOUT_MS = 15_000;
const REF = /^[a-z]{20}$/;

/**
 * The project and role a client asks for: the user's `.<ref>` suffix, else the TLS server name's ref
 * (`db.<ref>.<domain>` or `<ref>.<domain>`), else a database named as the ref, else the ref in the name of a
 * temporary or just-in-time login (`cli_login_<ref>_…`, `jit_<ref>_…`).
 */
export function routeOf(
  user: string,
  serverName: string | undefined,
  database: string | undefined,
): { ref: string; role: string } | undefined {
  const dot = user.lastIndexOf(".");
  if (dot > 0 && REF.test(user.slice(dot + 1))) return { ref: user.slice(dot + 1), role: user.slice(0, dot) };
  const labels = (serverName ?? "").toLowerCase().split(".");
  const named = labels[0] === "db" ? labels[1] : labels[0];
  if (named && REF.test(named) && labels.length > 2) return { ref: named, role: user };
  if (database && REF.test(database)) return { ref: database, role: user };
  // The CLI's temporary logins and just-in-time logins carry their project's ref in their names.
  const login = /^(?:cli_login|jit)_([a-z]{20})_/.exec(user);
  return login ? { ref: login[1], role: user } : undefined;
}

/** The project's login a role name stands for through the listener, or undefined when it is none of its own. */
export function projectLogin(record: ProjectRecord, role: string): string | undefined {
  if (role === "postgres" || role === record.ownerRole) return record.ownerRole;
  if (role.startsWith(`cli_login_${record.ref}_`) || role.startsWith(`jit_${record.ref}_`)) return role;
  return undefined;
}

/**
 * Waits for one complete frame at the start of `socket` and puts the bytes after it back: `frameLength` says how
 * long it is once enough bytes are there (undefined: not yet; throws when they cannot start one).
 */
function readFrame(socket: Duplex, frameLength: (buffered: Buffer) => number | undefined): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => done(new Error("startup timeout")), STARTUP_TIMEOUT_MS);
    const done = (error?: Error, frame?: Buffer, rest?: Buffer) => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("error", done);
      socket.off("close", onClose);
      socket.pause();
      if (rest?.length) socket.unshift(rest);
      if (error) reject(error);
      else resolve(frame!);
    };
    const onClose = () => done(new Error("closed before startup"));
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      let length: number | undefined;
      try {
        length = frameLength(buffered);
      } catch (e) {
        return done(e as Error);
      }
      if (length !== undefined && buffered.length >= length)
        done(undefined, buffered.subarray(0, length), buffered.subarray(length));
    };
    socket.on("data", onData);
    socket.once("error", done);
    socket.once("close", onClose);
    socket.resume();
  });
}

/** The length of the untyped first message (startup, SSL or cancel request) at the start of `buffered`. */
function firstMessageFrame(buffered: Buffer): number | undefined {
  const length = firstMessageLength(buffered);
  if (length !== undefined && (length < 8 || length > MAX_STARTUP_LENGTH))
    throw new Error("bad startup length");
  return length;
}

/** Waits for one complete untyped first message on `socket` (the bytes after it are put back). */
const readFirstMessage = (socket: Duplex) => readFrame(socket, firstMessageFrame);

/** True when `address` is one of the proxies in front of this node (STRATA_TRUSTED_PROXIES: addresses, CIDRs). */
function trustedProxy(address: string, proxies: string[]): boolean {
  return proxies.some((entry) =>
    entry.includes("/") ? withinCidrs(address, [entry]) : banAddress(entry) === address,
  );
}

/** Where each running session's cancel key (BackendKeyData) leads: cancel requests go to that cluster. */
type CancelTargets = Map<string, { host: string; port: number }>;

class Connection {
  private client: Duplex;
  private serverName: string | undefined;
  private upstream: net.Socket | undefined;
  private cancelKey: string | undefined;

  constructor(
    private readonly ctx: AppContext,
    private readonly socket: net.Socket,
    private readonly secureContext: tls.SecureContext,
    private readonly cancelTargets: CancelTargets,
    private readonly log: Logger,
  ) {
    this.client = socket;
  }

  /**
   * The client's address, canonical (an IPv4-mapped IPv6 address as IPv4): the peer's, or the one a trusted
   * proxy's PROXY header names.
   */
  private address = "";

  private get tls(): boolean {
    return this.client !== this.socket;
  }

  async run(): Promise<void> {
    const peer = banAddress(this.socket.remoteAddress) ?? this.socket.remoteAddress ?? "";
    this.address = peer;
    // Only a trusted proxy may name another address: from anyone else a header is no startup message.
    if (trustedProxy(peer, this.ctx.config.trustedProxies)) {
      const header = await readFrame(this.client, proxyHeaderLength);
      const proxied = header.length > 0 ? proxiedAddress(header) : undefined;
      if (proxied) this.address = banAddress(proxied) ?? proxied;
    }
    let first = parseFirstMessage(await readFirstMessage(this.client));
    for (let negotiations = 0; first.kind === "ssl" || first.kind === "gssenc"; negotiations++) {
      if (negotiations > 1 || (first.kind === "ssl" && this.tls))
        return this.refuse("08P01", "protocol violation");
      if (first.kind === "ssl") await this.startTls();
      else this.client.write("N");
      first = parseFirstMessage(await readFirstMessage(this.client));
    }
    if (first.kind === "cancel") return this.forwardCancel(first.bytes);
    if (first.kind !== "startup") return this.refuse("08P01", `invalid startup packet: ${first.reason}`);
    await this.connect(first);
  }

  private startTls(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.socket.write("S");
      const secure = new tls.TLSSocket(this.socket, {
        isServer: true,
        secureContext: this.secureContext,
        SNICallback: (name, cb) => {
          this.serverName = name;
          cb(null, this.secureContext);
        },
      });
      const timer = setTimeout(() => reject(new Error("TLS handshake timeout")), STARTUP_TIMEOUT_MS);
      secure.once("secure", () => {
        clearTimeout(timer);
        resolve();
      });
      secure.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
      this.client = secure;
    });
  }

  private async connect(startup: Extract<FirstMessage, { kind: "startup" }>): Promise<void> {
    const user = startup.params.get("user") ?? "";
    const route = routeOf(user, this.serverName, startup.params.get("database"));
    if (!route) return this.refuse("28000", "Tenant or user not found");
    if (startup.params.has("replication") && !/^(false|off|no|0)$/i.test(startup.params.get("replication")!))
      return this.refuse("28000", "Replication connections are not served here");
    const project = await this.ctx.registry.get(route.ref);
    if (!project) return this.refuse("28000", "Tenant or user not found");
    const record = project.record;
    if (record.status !== "ACTIVE_HEALTHY")
      return this.refuse("57P03", `Project ${record.ref} is not active (${record.status})`);
    const login = projectLogin(record, route.role);
    if (!login) return this.refuse("28000", `Role "${route.role}" is not a login of project ${record.ref}`);
    const refused = await refusal(this.ctx.platformPool, record, this.address, login, this.tls);
    if (refused) return this.refuse("28000", refused);

    const cluster = new URL(record.adminUrl);
    const database = decodeURIComponent(cluster.pathname.slice(1));
    const params = new Map(startup.params);
    params.delete("replication");
    params.set("user", login);
    params.set("database", database);
    const target = { host: cluster.hostname.replace(/^\[|\]$/g, ""), port: Number(cluster.port || 5432) };
    const upstream = net.connect(target);
    this.upstream = upstream;
    await new Promise<void>((resolve, reject) => {
      upstream.once("connect", resolve);
      upstream.once("error", reject);
    });
    const access = this.ctx.accessOf?.(record.clusterId);
    const relayed = access?.relaying(upstream.localPort!);
    upstream.write(startupMessage(startup.version, params));
    // The owner's session gets the project's vault key before the client has it (vaultSession.ts).
    const prepare =
      login === record.ownerRole
        ? async (session: net.Socket) => {
            if (!(await openOwnerVaultSession(session, project)))
              this.log.debug({ ref: record.ref }, "database listener: the owner's session has no vault key");
          }
        : undefined;
    // The platform CLI's temporary login steps down to `postgres`, which is the owner here, and the CLI's reset
    // is sent as Strata's, on the owner's sessions too (cliStatements.ts).
    const temporary = login.startsWith("cli_login_");
    const fromClient = (): Readable => {
      if (!temporary && login !== record.ownerRole) return this.client;
      const statements = this.client.pipe(new CliStatements(temporary ? record.ownerRole : undefined));
      statements.on("error", () => this.close());
      return statements;
    };
    this.relay(
      upstream,
      target,
      (code) => {
        if (code === "28P01") access?.relayedLoginFailure(this.address, database, login);
      },
      fromClient,
      prepare,
    );
    upstream.once("close", () => relayed?.());
  }

  /**
   * Pipes the two sides (the client's bytes as `fromClient`, called once, makes them); the server's messages are
   * read until the session is ready (or refused): a failed login is reported by its SQLSTATE, and the session's
   * cancel key is noted. With `prepare`, the listener runs its own steps on the ready session before the client
   * gets its ReadyForQuery; until then the client may send only its password messages, so nothing of its own runs
   * in between.
   */
  private relay(
    upstream: net.Socket,
    target: { host: string; port: number },
    failed: (code?: string) => void,
    fromClient: () => Readable,
    prepare?: (session: net.Socket) => Promise<void>,
  ) {
    const reader = new ServerMessageReader();
    const passClient = prepare ? this.passPasswordMessages(upstream, fromClient) : undefined;
    const watch = (chunk: Buffer) => {
      let messages;
      try {
        messages = reader.push(chunk);
      } catch {
        return this.close();
      }
      if (!prepare) this.client.write(chunk);
      for (const m of messages) {
        if (m.type === "E") failed(errorCode(m.body));
        else if (m.type === "K" && m.body.length >= 8) {
          this.cancelKey = m.body.toString("hex");
          this.cancelTargets.set(this.cancelKey, target);
        }
        if (m.type === "Z") {
          // Ready for queries: from here on the bytes only pass.
          upstream.off("data", watch);
          if (!prepare) return void upstream.pipe(this.client);
          prepare(upstream).then(
            () => {
              passClient!();
              this.client.write(protocolMessage(m.type, m.body));
              upstream.pipe(this.client);
            },
            (e: Error) => {
              this.log.debug({ err: e.message }, "database listener: preparing the session failed");
              this.close();
            },
          );
          return;
        }
        if (prepare) this.client.write(protocolMessage(m.type, m.body));
      }
    };
    upstream.on("data", watch);
    if (!prepare) fromClient().pipe(upstream);
    this.client.resume();
    const end = () => this.close();
    upstream.once("close", end);
    upstream.on("error", end);
    this.client.once("close", end);
    this.client.on("error", end);
  }

  /**
   * Relays the client's password messages (the authentication exchange) to `upstream` and closes the connection
   * on any other message; answers the function that, once the session is ready, lets everything pass.
   */
  private passPasswordMessages(upstream: net.Socket, fromClient: () => Readable): () => void {
    const reader = new ServerMessageReader();
    const onData = (chunk: Buffer) => {
      let messages;
      try {
        messages = reader.push(chunk);
      } catch {
        return this.close();
      }
      for (const m of messages) {
        if (m.type !== "p") return this.close();
        upstream.write(protocolMessage(m.type, m.body));
      }
    };
    this.client.on("data", onData);
    return () => {
      this.client.off("data", onData);
      fromClient().pipe(upstream);
    };
  }

  /** A cancel request goes to the cluster of the session it names, if the listener relays it. */
  private forwardCancel(bytes: Buffer): void {
    const target = this.cancelTargets.get(bytes.subarray(8).toString("hex"));
    if (target) {
      const c = net.connect(target, () => c.end(bytes));
      c.on("error", () => {});
    }
    this.close();
  }

  private refuse(code: string, message: string): void {
    this.log.debug({ address: this.address, message }, "database listener refused a connection");
    this.client.end(fatalError(code, message));
  }

  close(): void {
    if (this.cancelKey) this.cancelTargets.delete(this.cancelKey);
    this.upstream?.destroy();
    this.client.destroy();
    this.socket.destroy();
  }
}

/** Starts the listener; answers once it listens. */
export async function startDbListener(ctx: AppContext, options: DbListenerOptions): Promise<DbListener> {
  const log = ctx.log.child({ component: "db-listener" });
  const connections = new Set<Connection>();
  const cancelTargets: CancelTargets = new Map();
  const server = net.createServer((socket) => {
    socket.setNoDelay(true);
    socket.on("error", () => {});
    const connection = new Connection(ctx, socket, options.secureContext, cancelTargets, log);
    connections.add(connection);
    socket.once("close", () => connections.delete(connection));
    connection.run().catch((e: Error) => {
      log.debug({ err: e.message }, "database listener connection ended");
      connection.close();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const c of connections) c.close();
      await closed;
    },
  };
}
