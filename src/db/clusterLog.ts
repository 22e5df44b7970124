import { chownSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { open, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";

/**
 * The log of a cluster Strata runs, written by PostgreSQL's logging collector as `jsonlog` (PostgreSQL 15+)
 * and read back here as records. In that format every record is one line of JSON whose fields PostgreSQL
 * escapes itself, so text a client gets logged (a statement, an error naming its input, a raised message,
 * newlines and quotes included) stays inside its own field: it can never pass for another record, nor for the
 * address, database or severity of one. (The plain stderr log cannot give that: a logged statement's lines are
 * written raw, and a forged continuation line looks exactly like a real line.) Output the collector gets from
 * other programs (an archive command's errors) goes to a separate `.log` file this reader never parses.
 */

export interface ClusterLogRecord {
  /** e.g. `2026-11-28 03:00:00.000 UTC` */
  timestamp: string;
  /** The session's role and database (as the client asked for them, during authentication). */
  user?: string;
  dbname?: string;
  pid?: number;
  /** The client's address (log_hostname is off): set by the server from the socket. */
  remote_host?: string;
  /** The client's port (tells the database listener's own connections apart, src/pooler). */
  remote_port?: number;
  error_severity: string;
  state_code?: string;
  message: string;
  detail?: string;
  hint?: string;
  context?: string;
  statement?: string;
  backend_type?: string;
}

/** The log files of the cluster in `databaseDir` live beside it, not in it: physical copies leave them out. */
export function clusterLogDir(databaseDir: string): string {
  return `${databaseDir}-log`;
}

/** Settings of a cluster whose log Strata reads (given on the command line: ALTER SYSTEM cannot change them). */
export function clusterLogFlags(databaseDir: string): string[] {
  return [
    "-c",
    "logging_collector=on",
    "-c",
    "log_destination=jsonlog",
    "-c",
    `log_directory=${clusterLogDir(databaseDir)}`,
    // An address, never a name looked up in DNS: bans are recorded by address.
    "-c",
    "log_hostname=off",
  ];
}

/**
 * Before a start: the log directory exists, writable by `owner` (the OS user PostgreSQL runs as, when Strata is
 * root), and holds nothing of an earlier run, whose `current_logfiles` would otherwise be read again.
 */
export function prepareClusterLog(databaseDir: string, owner?: { uid: number; gid: number }): void {
  const dir = clusterLogDir(databaseDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (owner) chownSync(dir, owner.uid, owner.gid);
  for (const name of readdirSync(dir)) rmSync(path.join(dir, name), { force: true });
  rmSync(path.join(databaseDir, "current_logfiles"), { force: true });
}

const text = (value: unknown) => (typeof value === "string" ? value : undefined);

/** One line of the jsonlog as a record; anything else (a line cut short) is no record. */
export function parseClusterLogRecord(line: string): ClusterLogRecord | undefined {
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const severity = text(value.error_severity);
  const message = text(value.message);
  if (severity === undefined || message === undefined) return undefined;
  return {
    timestamp: text(value.timestamp) ?? "",
    user: text(value.user),
    dbname: text(value.dbname),
    pid: typeof value.pid === "number" ? value.pid : undefined,
    remote_host: text(value.remote_host),
    remote_port: typeof value.remote_port === "number" ? value.remote_port : undefined,
    error_severity: severity,
    state_code: text(value.state_code),
    message,
    detail: text(value.detail),
    hint: text(value.hint),
    context: text(value.context),
    statement: text(value.statement),
    backend_type: text(value.backend_type),
  };
}

/** How often the log is looked at for new records. */
const POLL_MS = 100;
const CHUNK = 1 << 20;
const NEWLINE = 0x0a;

/**
 * Follows the cluster's current jsonlog file (named in `current_logfiles`) across rotations and restarts,
 * handing each complete record to `onRecord`. A file read to its end that is no longer current is deleted:
 * its records live on where `onRecord` put them.
 */
export class ClusterLogTail {
  private file: string | undefined;
  private offset = 0;
  private rest = Buffer.alloc(0);
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;

  constructor(
    private readonly databaseDir: string,
    private readonly onRecord: (record: ClusterLogRecord) => void,
    private readonly onError: (error: Error) => void = () => {},
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.poll(), POLL_MS);
    this.timer.unref();
  }

  /** Reads what was written up to now (after a stop: the last records), then stops following. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.reading;
    await this.poll();
  }

  /** Reads what was written up to now. */
  poll(): Promise<void> {
    this.reading ??= this.readNew()
      .catch((e: Error) => this.onError(e))
      .finally(() => (this.reading = undefined));
    return this.reading;
  }

  /** `current_logfiles` as last read, and its modification time then: read again only when it changes. */
  private listing: { mtimeMs: number; file: string | undefined } | undefined;

  private async currentFile(): Promise<string | undefined> {
    const listingPath = path.join(this.databaseDir, "current_logfiles");
    const mtimeMs = (await stat(listingPath).catch(() => undefined))?.mtimeMs;
    if (mtimeMs === undefined) return (this.listing = undefined);
    if (this.listing?.mtimeMs === mtimeMs) return this.listing.file;
    const listing = await readFile(listingPath, "utf8").catch(() => undefined);
    const line = listing?.split("\n").find((l) => l.startsWith("jsonlog "));
    const file = line && path.resolve(this.databaseDir, line.slice("jsonlog ".length));
    this.listing = { mtimeMs, file };
    return file;
  }

  private async readNew(): Promise<void> {
    const current = await this.currentFile();
    if (current !== this.file) {
      // The collector names a new file only after closing the old one: that one is read to its end first.
      if (this.file) {
        await this.readToEnd(this.file);
        await this.removeFinished(this.file);
      }
      this.file = current;
      this.offset = 0;
      this.rest = Buffer.alloc(0);
    }
    if (this.file) await this.readToEnd(this.file);
  }

  private async readToEnd(file: string): Promise<void> {
    // Most polls find nothing new: a stat, no open and no buffer then.
    const known = (await stat(file).catch(() => undefined))?.size;
    if (known === undefined || known === this.offset) return;
    const handle = await open(file, "r").catch(() => undefined);
    if (!handle) return;
    try {
      const { size } = await handle.stat();
      if (size < this.offset) this.offset = 0;
      const buffer = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(size - this.offset, 1)));
      while (this.offset < size) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.offset);
        if (!bytesRead) break;
        this.offset += bytesRead;
        this.take(buffer.subarray(0, bytesRead));
      }
    } finally {
      await handle.close();
    }
  }

  /** Splits at newlines as bytes (a read may end inside a character); the last, unfinished line waits. */
  private take(bytes: Buffer): void {
    let data = this.rest.length ? Buffer.concat([this.rest, bytes]) : bytes;
    for (let end = data.indexOf(NEWLINE); end >= 0; end = data.indexOf(NEWLINE)) {
      const record = parseClusterLogRecord(data.subarray(0, end).toString("utf8"));
      data = data.subarray(end + 1);
      if (record) this.onRecord(record);
    }
    this.rest = Buffer.from(data);
  }

  /** The finished jsonlog file and the stderr file of the same name. */
  private async removeFinished(file: string): Promise<void> {
    const base = file.replace(/\.json$/, "");
    await Promise.all([rm(file, { force: true }), rm(`${base}.log`, { force: true })]);
  }
}
