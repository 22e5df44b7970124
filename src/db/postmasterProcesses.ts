import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import path from "node:path";

// The processes of a cluster's data directory as /proc shows them: what a start finds left behind by a
// killed postmaster or a killed server, and how it ends them.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every process of a cluster works in its data directory; a process gone meanwhile is none of them. */
function postgresProcessesIn(databaseDir: string): number[] {
  if (!existsSync("/proc")) return [];
  const dir = realpathSync(databaseDir);
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/cwd`) === dir && isPostgres(Number(name))) pids.push(Number(name));
    } catch {
      // Ended, or not ours to inspect.
    }
  }
  return pids;
}

/** How long the children of a dead postmaster get to notice and exit (PostgreSQL's own grace is 5 s). */
const ORPHAN_GRACE_MS = 5000;

/**
 * The children of a postmaster killed with -9 run on until they notice its death, holding its shared memory,
 * and PostgreSQL refuses to start while they do: wait for them, and kill those still running after the
 * grace (the postmaster does the same to children that ignore its stop). A live postmaster's are left alone.
 */
export async function endOrphanedChildren(databaseDir: string): Promise<void> {
  if (livePostmaster(databaseDir)) return;
  const until = Date.now() + ORPHAN_GRACE_MS;
  while (postgresProcessesIn(databaseDir).length && Date.now() < until) await sleep(100);
  for (const pid of postgresProcessesIn(databaseDir)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
  for (let i = 0; i < 50 && postgresProcessesIn(databaseDir).length; i++) await sleep(100);
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

/** The pid postmaster.pid names, when that process is alive and a postgres. */
function livePostmaster(databaseDir: string): number | undefined {
  const pidFile = path.join(databaseDir, "postmaster.pid");
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 && alive(pid) && isPostgres(pid) ? pid : undefined;
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
export async function stopOrphanedPostmaster(databaseDir: string): Promise<void> {
  const pid = livePostmaster(databaseDir);
  if (!pid) return;
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
