import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { processAlive } from "../processAlive";

/**
 * Scratch directories are `strata-fn-<owner>-XXXXXX` under the system's temporary directory, the owner being
 * the pool that made them (`<pid>-<token>` of its Strata process), so a start-up can tell a dead Strata's
 * leftovers from another running Strata's directories (several may share the temporary directory, and one
 * process may hold several servers, as tests do).
 */
const SCRATCH_PREFIX = "strata-fn-";
const OWNED_SCRATCH = /^strata-fn-(\d+)-([0-9a-f]{8})-/;
const livePools = new Set<string>();

/** A new scratch directory for a worker of the pool `owner`. */
export function makeScratchDir(owner: string): string {
  return mkdtempSync(path.join(os.tmpdir(), `${SCRATCH_PREFIX}${owner}-`));
}

/** A new owner id for a pool's workers; `release` it when the pool stops. */
export function claimOwner(): { owner: string; release: () => void } {
  const token = randomBytes(4).toString("hex");
  livePools.add(token);
  return { owner: `${process.pid}-${token}`, release: () => livePools.delete(token) };
}

/**
 * Whether a scratch directory that no running worker names may still get one: the pool named in it still
 * runs (in this process or another one), or, for a directory of an older Strata (no owner in its name), it
 * was made less than a minute ago.
 */
function mayBeStarting(tmp: string, dirName: string): boolean {
  const owned = OWNED_SCRATCH.exec(dirName);
  if (!owned) {
    const made = statSync(path.join(tmp, dirName), { throwIfNoEntry: false })?.mtimeMs ?? 0;
    return Date.now() - made < 60_000;
  }
  const pid = Number(owned[1]);
  return pid === process.pid ? livePools.has(owned[2]) : processAlive(pid);
}

/** The arguments and parent of each process of this machine (none where there is no /proc). */
function processes(): { pid: number; ppid: number; argv: string[] }[] {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const found = [];
  for (const pid of pids) {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // The parent pid is the second field after the command name (which may hold spaces and parentheses).
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      found.push({ pid: Number(pid), ppid, argv });
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return found;
}

/**
 * Stops the function workers a previous Strata left running and removes the scratch directories nobody
 * uses, under this process's temporary directory. A worker is recognised by its command line (Deno running
 * with a socket in a `strata-fn-` directory there; a function cannot change its command line) and is left
 * when its parent is still the Strata process that started it. A scratch directory is removed when no
 * running worker names it and the pool that made it no longer runs. Called at start, before any worker of
 * this server (other servers of this process, and other Strata processes, keep theirs).
 */
export function reapOrphanWorkers(): { killed: number; removed: number } {
  const tmp = os.tmpdir();
  const inUse = new Set<string>();
  let killed = 0;
  for (const { pid, ppid, argv } of processes()) {
    if (!/^deno(\.exe)?$/.test(path.basename(argv[0] ?? ""))) continue;
    const socket = argv.find(
      (a) => path.dirname(path.dirname(a)) === tmp && path.basename(a) === "worker.sock",
    );
    const dirName = socket && path.basename(path.dirname(socket));
    if (!dirName?.startsWith(SCRATCH_PREFIX)) continue;
    // A worker whose directory names its Strata is orphaned once its parent is another process; one of an
    // older Strata (no owner in the name) once init adopted it.
    const owner = OWNED_SCRATCH.exec(dirName);
    if (owner ? Number(owner[1]) === ppid : ppid !== 1) {
      inUse.add(dirName);
      continue;
    }
    try {
      process.kill(pid, "SIGKILL");
      killed++;
    } catch {
      // Ended meanwhile.
    }
  }
  let removed = 0;
  let names: string[] = [];
  try {
    names = readdirSync(tmp).filter((name) => name.startsWith(SCRATCH_PREFIX));
  } catch {
    // No temporary directory: nothing to remove.
  }
  for (const name of names) {
    if (inUse.has(name) || mayBeStarting(tmp, name)) continue;
    rmSync(path.join(tmp, name), { recursive: true, force: true });
    removed++;
  }
  return { killed, removed };
}
