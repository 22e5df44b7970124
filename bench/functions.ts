/**
 * Edge functions against their floor, each in a process of its own: `npm run bench:functions [-- --cold N
 * --quick]` (BENCH_SECONDS, BENCH_CONCURRENCY as bench/harness.ts).
 *
 * Strata (`strata start` on an embedded PostgreSQL) with a hello-world function deployed through the
 * Management API and invoked through /functions/v1 with the anon key (verify_jwt on); the floor is the same
 * module under a bare `Deno.serve` on a TCP port (bench/floors/functions.mjs). Warm: one warm worker,
 * concurrent clients, invocations a second and p50/p99 (floor, Strata, Strata, floor: each side's better run). Cold: from a deploy's
 * answer to the new version's first answer (Strata starts a new worker) against `deno run` of the floor with a new module,
 * from its start to its first answer.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { denoBinary } from "../src/functions/deno";
import { CONCURRENCY, DURATION_MS, load, type Stats } from "./harness";
import { argument, startServerProcess, stopServerProcess, type ServerProcess } from "./process";
import { flag, freePort, percentile, printTable, startHelper, stopHelper, type Row } from "./report";

const QUICK = flag("quick");
const COLD_STARTS = Number(argument("cold", QUICK ? "3" : "20"));
/** Strata's port (its PostgreSQL's is the next); 0: free ones. */
const PORT = Number(argument("port", "0"));
/** The floor's port, a free one found at start. */
let FLOOR_PORT = 0;
const TOKEN = "sbp_" + "f00c".repeat(8) + "01234567";

const source = (revision: number) =>
  `Deno.serve(() => Response.json({ message: "Hello world", revision: ${revision} }))\n`;

async function deploy(server: ServerProcess, revision: number) {
  const form = new FormData();
  form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: "hello" }));
  form.append("file", new Blob([source(revision)]), "index.ts");
  const res = await fetch(
    `http://127.0.0.1:${server.port}/v1/projects/${server.ref}/functions/deploy?slug=hello`,
    {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: form,
    },
  );
  if (res.status !== 201) throw new Error(`deploy failed: ${res.status} ${await res.text()}`);
}

async function answered(res: Response, revision: number) {
  const body = (await res.json()) as { revision?: number };
  if (body.revision !== revision)
    throw new Error(`expected revision ${revision}, got ${JSON.stringify(body)}`);
}

/**
 * Invokes until the new revision answers: a node drops its kept copy of a function when the deploy's
 * notification reaches it, which on a busy machine may come a moment after the deploy's answer.
 */
async function newRevision(url: string, headers: Record<string, string>, revision: number) {
  for (;;) {
    const body = (await (await fetch(url, { headers })).json()) as { revision?: number };
    if (body.revision === revision) return;
    if (body.revision !== revision - 1)
      throw new Error(`expected revision ${revision}, got ${JSON.stringify(body)}`);
  }
}

/** Each process's parent, command name and CPU time so far (user + system, ms), from /proc (Linux). */
function processTable(): Map<number, { ppid: number; comm: string; cpuMs: number }> {
  const table = new Map<number, { ppid: number; comm: string; cpuMs: number }>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // ppid, utime and stime: fields 4, 14 and 15 of the line, times in clock ticks (100 a second).
      table.set(Number(entry), {
        ppid: Number(fields[1]),
        comm,
        cpuMs: (Number(fields[11]) + Number(fields[12])) * 10,
      });
    } catch {
      // Gone meanwhile.
    }
  }
  return table;
}

/** The embedded cluster's postmaster (its command line names the server's data directory). */
function postmasterOf(dataDir: string): number | undefined {
  for (const [pid, p] of processTable()) {
    if (p.comm !== "postgres") continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(dataDir)) return pid;
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}

/** CPU time (ms) used so far by the process trees under `roots`, by command name (node, deno, postgres). */
function cpuOfTrees(roots: number[]): Map<string, number> {
  const table = processTable();
  const children = new Map<number, number[]>();
  for (const [pid, p] of table) children.set(p.ppid, [...(children.get(p.ppid) ?? []), pid]);
  const byCommand = new Map<string, number>();
  const seen = new Set<number>();
  const visit = (pid: number) => {
    if (seen.has(pid)) return;
    seen.add(pid);
    const p = table.get(pid);
    if (p) byCommand.set(p.comm, (byCommand.get(p.comm) ?? 0) + p.cpuMs);
    for (const child of children.get(pid) ?? []) visit(child);
  };
  roots.forEach(visit);
  return byCommand;
}

/**
 * A load run with the CPU each side spent per invocation (ms): the bench's own client and the processes under
 * `roots` by command name. Where the one machine runs them all, that is what bounds the ratio of invocations.
 */
async function measured(roots: number[], send: () => Promise<Response>) {
  const proc = existsSync("/proc/self/stat");
  const before = proc ? cpuOfTrees(roots) : new Map<string, number>();
  const clientBefore = process.cpuUsage();
  let sent = 0;
  const stats = await load(() => {
    sent++;
    return send();
  });
  const client = process.cpuUsage(clientBefore);
  const after = proc ? cpuOfTrees(roots) : new Map<string, number>();
  const cpu = new Map([["client", (client.user + client.system) / 1000 / sent]]);
  for (const [comm, ms] of after) cpu.set(comm, (ms - (before.get(comm) ?? 0)) / sent);
  return { ...stats, cpu };
}

const perInvocation = (cpu: Map<string, number>) =>
  [...cpu].map(([comm, ms]) => `${comm} ${ms.toFixed(3)}`).join(", ");

/** Whether something accepts connections on the port. */
function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(port, "127.0.0.1");
    probe.once("connect", () => {
      probe.destroy();
      resolve(true);
    });
    probe.once("error", () => resolve(false));
  });
}

/** `deno run` of the floor with a new module: ms from the start to its first answer. */
async function floorColdStart(dir: string, revision: number): Promise<number> {
  const module = path.join(dir, `cold-${revision}.ts`);
  writeFileSync(module, source(revision));
  const started = performance.now();
  const child = spawn(
    denoBinary(),
    [
      "run",
      "--no-prompt",
      "--allow-net",
      `--allow-read=${dir}`,
      "bench/floors/functions.mjs",
      String(FLOOR_PORT),
      module,
    ],
    { env: { DENO_DIR: path.join(dir, ".deno"), DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" }, stdio: "ignore" },
  );
  try {
    while (!(await accepting(FLOOR_PORT))) await new Promise((r) => setTimeout(r, 5));
    await answered(await fetch(`http://127.0.0.1:${FLOOR_PORT}/`), revision);
    return performance.now() - started;
  } finally {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
  }
}

async function main() {
  FLOOR_PORT = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), "strata-bench-functions-"));
  const server = await startServerProcess({
    name: "strata-bench-functions",
    port: PORT,
    pgPort: PORT + 1,
    jwtSecret: "bench-secret-" + crypto.randomUUID(),
    managementToken: TOKEN,
  });
  const strataUrl = `http://127.0.0.1:${server.port}/functions/v1/hello`;
  const headers = { apikey: server.anonKey, authorization: `Bearer ${server.anonKey}` };
  try {
    // Warm: the floor and Strata serve revision 0.
    writeFileSync(path.join(dir, "hello.ts"), source(0));
    const floor = await startHelper(
      denoBinary(),
      [
        "run",
        "--no-prompt",
        "--allow-net",
        `--allow-read=${dir}`,
        "bench/floors/functions.mjs",
        String(FLOOR_PORT),
        path.join(dir, "hello.ts"),
      ],
      { DENO_DIR: path.join(dir, ".deno") },
    );
    await deploy(server, 0);
    await answered(await fetch(strataUrl, { headers }), 0);
    let floorWarm, strataWarm;
    try {
      // Floor, Strata, Strata, floor: each side's better run (by invocations a second).
      const better = <T extends Stats>(a: T, b: T) => (a.rps >= b.rps ? a : b);
      const strataRoots = [server.child.pid!, postmasterOf(server.dataDir) ?? -1];
      const floorRun = () => measured([floor.pid!], () => fetch(`http://127.0.0.1:${FLOOR_PORT}/`));
      const strataRun = () => measured(strataRoots, () => fetch(strataUrl, { headers }));
      const floorFirst = await floorRun();
      strataWarm = await strataRun();
      strataWarm = better(strataWarm, await strataRun());
      floorWarm = better(floorFirst, await floorRun());
    } finally {
      await stopHelper(floor);
    }

    const floorCold: number[] = [];
    const strataCold: number[] = [];
    for (let i = 1; i <= COLD_STARTS; i++) {
      floorCold.push(await floorColdStart(dir, i));
      await deploy(server, i);
      const t = performance.now();
      await newRevision(strataUrl, headers, i);
      strataCold.push(performance.now() - t);
    }
    floorCold.sort((a, b) => a - b);
    strataCold.sort((a, b) => a - b);
    const rows: Row[] = [
      {
        name: `warm, ${CONCURRENCY} clients, ${DURATION_MS / 1000}s`,
        unit: "invocations/s",
        floor: floorWarm.rps,
        strata: strataWarm.rps,
        better: "higher",
        target: 0.8,
      },
      {
        name: "warm p50",
        unit: "ms",
        floor: floorWarm.p50,
        strata: strataWarm.p50,
        better: "lower",
        target: 1.25,
      },
      {
        name: "warm p99",
        unit: "ms",
        floor: floorWarm.p99,
        strata: strataWarm.p99,
        better: "lower",
        target: 1.25,
      },
      {
        name: `cold start p50 (×${COLD_STARTS})`,
        unit: "ms",
        floor: percentile(floorCold, 50),
        strata: percentile(strataCold, 50),
        better: "lower",
        target: 2,
      },
      {
        name: `cold start p99 (×${COLD_STARTS})`,
        unit: "ms",
        floor: percentile(floorCold, 99),
        strata: percentile(strataCold, 99),
        better: "lower",
        target: 2,
      },
    ];
    const met = printTable("edge functions (floor: Deno.serve of the same module; cold: deno run)", rows);
    console.log(`\nCPU ms per warm invocation, floor: ${perInvocation(floorWarm.cpu)}`);
    console.log(`CPU ms per warm invocation, Strata: ${perInvocation(strataWarm.cpu)}`);
    console.log(`\nfunctions: ${met ? "every target met" : "targets NOT met"}`);
  } finally {
    await stopServerProcess(server);
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
