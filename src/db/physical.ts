import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chmod, chown, copyFile, lstat, mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import type pg from "pg";
import { clusterOwner } from "./clusterDirectory";
import { embeddedPostgresBinary, embeddedPostgresFlags, shellWord } from "./embedded";
import { stopOrphanedPostmaster } from "./postmasterProcesses";

/**
 * Physical copies of a cluster Strata runs, and the extra clusters made from them (read replicas, restore
 * clusters). The embedded distribution has no pg_basebackup, so a base backup is taken with Postgres's
 * low-level API: `pg_backup_start` and `pg_backup_stop` on one session, the data directory copied from disk
 * in between (the cluster is local), and `backup_label`/`tablespace_map` written from pg_backup_stop's answer.
 */

/** Directories whose contents a base backup leaves out (Postgres rebuilds them; see "Backing up the data directory"). */
const EMPTIED = new Set([
  "pg_wal",
  "pg_replslot",
  "pg_dynshmem",
  "pg_notify",
  "pg_serial",
  "pg_snapshots",
  "pg_stat_tmp",
  "pg_subtrans",
]);
/** Files of the running cluster that must not be in a copy. */
const SKIPPED = new Set([
  "postmaster.pid",
  "postmaster.opts",
  "backup_label",
  "tablespace_map",
  "backup_manifest",
  "standby.signal",
  "recovery.signal",
  "current_logfiles",
  "pg_internal.init",
]);

export interface BaseBackup {
  startLsn: string;
  stopLsn: string;
  /** WAL segment holding the start point: the archive must hold every segment from it on. */
  startWalFile: string;
  /** When pg_backup_stop answered: the copy is consistent from then on (a restore target must not be earlier). */
  consistentAt: Date;
  bytes: number;
}

const isMissing = (e: unknown) => (e as { code?: string }).code === "ENOENT";

/**
 * Copies `from` into `to`: with `live`, as a base backup of a running cluster (its run-time files and the
 * contents of EMPTIED left out; a file that goes away meanwhile, a dropped table, is skipped), else all of it.
 */
async function copyTree(from: string, to: string, live: boolean, top = true): Promise<number> {
  const owner = clusterOwner();
  // The OS user PostgreSQL runs as must reach the copy through the directories above it.
  if (top) await mkdir(path.dirname(to), { recursive: true, mode: 0o755 });
  await mkdir(to, { mode: 0o700 });
  if (owner) await chown(to, owner.uid, owner.gid);
  let bytes = 0;
  let entries;
  try {
    entries = await readdir(from, { withFileTypes: true });
  } catch (e) {
    if (isMissing(e)) return 0;
    throw e;
  }
  for (const entry of entries) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (live && (SKIPPED.has(entry.name) || entry.name.startsWith("pgsql_tmp"))) continue;
    if (entry.isSymbolicLink()) {
      throw new Error(
        `the data directory holds a symbolic link (${entry.name}): tablespaces are not copied by Strata's base backups`,
      );
    }
    if (entry.isDirectory()) {
      if (live && top && EMPTIED.has(entry.name)) {
        await mkdir(target, { mode: 0o700 });
        if (entry.name === "pg_wal") await mkdir(path.join(target, "archive_status"), { mode: 0o700 });
        if (owner) {
          await chown(target, owner.uid, owner.gid);
          if (entry.name === "pg_wal") await chown(path.join(target, "archive_status"), owner.uid, owner.gid);
        }
        continue;
      }
      bytes += await copyTree(source, target, live, false);
    } else if (entry.isFile()) {
      try {
        await copyFile(source, target);
      } catch (e) {
        if (isMissing(e)) continue;
        throw e;
      }
      if (owner) await chown(target, owner.uid, owner.gid);
      bytes += (await lstat(target)).size;
    }
  }
  return bytes;
}

/**
 * Takes a base backup of the cluster `client` is a superuser session of, whose data directory is
 * `dataDir`, into the new directory `target`. With WAL archiving on, pg_backup_stop waits until the WAL the
 * copy needs is archived. The session must stay open throughout (a lost session ends the backup).
 */
export async function takeBaseBackup(
  client: pg.ClientBase,
  dataDir: string,
  target: string,
  label: string,
): Promise<BaseBackup> {
  if (existsSync(target)) throw new Error(`${target} exists already`);
  const { rows: started } = await client.query(
    "select lsn::text as lsn, pg_walfile_name(lsn) as walfile from pg_backup_start($1, true) as lsn",
    [label],
  );
  let stopped = false;
  try {
    const bytes = await copyTree(dataDir, target, true);
    const { rows } = await client.query(
      "select lsn::text as lsn, labelfile, spcmapfile from pg_backup_stop(true)",
    );
    stopped = true;
    const consistentAt = new Date();
    const owner = clusterOwner();
    const files: [string, string][] = [["backup_label", rows[0].labelfile]];
    if (rows[0].spcmapfile) files.push(["tablespace_map", rows[0].spcmapfile]);
    for (const [name, text] of files) {
      await writeFile(path.join(target, name), text, { mode: 0o600 });
      if (owner) await chown(path.join(target, name), owner.uid, owner.gid);
    }
    return {
      startLsn: started[0].lsn,
      stopLsn: rows[0].lsn,
      startWalFile: started[0].walfile,
      consistentAt,
      bytes,
    };
  } catch (e) {
    if (!stopped) await client.query("select pg_backup_stop(false)").catch(() => {});
    await rm(target, { recursive: true, force: true });
    throw e;
  }
}

/** Copies a stored base backup into a new data directory (for a restore cluster). */
export async function copyBaseBackup(from: string, to: string): Promise<void> {
  await copyTree(from, to, false);
}

/** A port no process listens on now (on loopback). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The command a cluster fetches archived WAL segments with (a missing one fails: not archived yet). */
export function restoreCommand(archiveDir: string): string {
  return `cp ${shellWord(path.resolve(archiveDir))}/%f %p`;
}

/** Segments per "log id" for a segment size, as Postgres numbers WAL files. */
function segmentNumber(walFile: string, segmentBytes: number): bigint {
  const perId = 0x1_0000_0000n / BigInt(segmentBytes);
  return BigInt("0x" + walFile.slice(8, 16)) * perId + BigInt("0x" + walFile.slice(16, 24));
}

/** The WAL file names from `first` to `last` (same timeline) missing in `archiveDir`. */
export function missingSegments(
  archiveDir: string,
  first: string,
  last: string,
  segmentBytes: number,
): string[] {
  const have = new Set(existsSync(archiveDir) ? readdirSync(archiveDir) : []);
  const perId = 0x1_0000_0000n / BigInt(segmentBytes);
  const timeline = first.slice(0, 8);
  const missing: string[] = [];
  for (let n = segmentNumber(first, segmentBytes); n <= segmentNumber(last, segmentBytes); n++) {
    const name =
      timeline +
      (n / perId).toString(16).toUpperCase().padStart(8, "0") +
      (n % perId).toString(16).toUpperCase().padStart(8, "0");
    if (!have.has(name)) missing.push(name);
  }
  return missing;
}

/** Archived WAL older than `oldestNeeded` (a segment, or its .backup/.partial companions): no base backup kept needs it. */
export async function removeArchivedBefore(archiveDir: string, oldestNeeded: string): Promise<number> {
  if (!existsSync(archiveDir)) return 0;
  let removed = 0;
  for (const name of readdirSync(archiveDir)) {
    // As pg_archivecleanup: compare log id and segment, whatever the timeline; history files are kept.
    if (!/^[0-9A-F]{24}(\.|$)/.test(name) || name.slice(8, 24) >= oldestNeeded.slice(8, 24)) continue;
    await rm(path.join(archiveDir, name), { force: true });
    removed++;
  }
  return removed;
}

export interface ClusterProcessOptions {
  dataDir: string;
  /** STRATA_DATA_DIR: the server runs from Strata's copy of the installation in it, as the embedded one. */
  strataDataDir: string;
  port: number;
  listenAddresses: string;
  /** More `-c name=value` settings after Strata's own (a later one wins). */
  settings: Record<string, string>;
  onLog: (line: string) => void;
}

/**
 * A PostgreSQL server on a data directory made by Strata (a replica, a restore cluster), run as a child
 * process with the embedded cluster's binaries and settings. `start` answers once it accepts connections
 * (read-only ones count: a standby's), and fails with its last log lines if it exits first.
 */
export class ClusterProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly recent: string[] = [];

  constructor(readonly options: ClusterProcessOptions) {}

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last lines the server logged (why it stopped). */
  lastLines(): string {
    return this.recent.join("").trim().split("\n").slice(-5).join(" | ");
  }

  async start(): Promise<void> {
    const { dataDir, port, listenAddresses, settings, onLog } = this.options;
    const postgres = await embeddedPostgresBinary(this.options.strataDataDir);
    await stopOrphanedPostmaster(dataDir);
    await chmod(dataDir, 0o700);
    const flags = [...embeddedPostgresFlags(listenAddresses)];
    for (const [name, value] of Object.entries(settings)) flags.push("-c", `${name}=${value}`);
    const owner = clusterOwner();
    const child = spawn(postgres, ["-D", dataDir, "-p", String(port), ...flags], {
      ...(owner ?? {}),
      env: { LC_MESSAGES: "C" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    await new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        const text = chunk.toString("utf8");
        this.recent.push(text);
        if (this.recent.length > 20) this.recent.shift();
        onLog(text);
        if (/database system is ready to accept (read-only )?connections/.test(text)) resolve();
      };
      child.stdout!.on("data", onData);
      child.stderr!.on("data", onData);
      child.once("error", reject);
      child.once("exit", (code) =>
        reject(new Error(`PostgreSQL on port ${port} exited (code ${code}): ${this.lastLines()}`)),
      );
    });
  }

  /** Resolves when the server exits by itself or is stopped. */
  whenExited(): Promise<void> {
    return this.exited;
  }

  /** Fast shutdown (sessions ended, nothing lost); waits for the process to exit. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    child.kill("SIGINT");
    const timer = setTimeout(() => child.kill("SIGQUIT"), 30_000);
    await this.exited;
    clearTimeout(timer);
  }
}

/** The cluster Strata runs itself (the embedded one), as physical backups and replicas need it. */
export interface OwnCluster {
  /** platform.clusters.id */
  clusterId: string;
  /** Superuser URL of its maintenance database. */
  adminUrl: string;
  /** Its data directory. */
  databaseDir: string;
  /** Where its WAL segments are archived. */
  archiveDir: string;
  /** STRATA_DATA_DIR: base backups, replicas and restore clusters get directories of their own in it. */
  dataDir: string;
  listenAddresses: string;
}
