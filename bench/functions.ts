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
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
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
      const better = (a: Stats, b: Stats) => (a.rps >= b.rps ? a : b);
      const floorFirst = await load(() => fetch(`http://127.0.0.1:${FLOOR_PORT}/`));
      strataWarm = await load(() => fetch(strataUrl, { headers }));
      strataWarm = better(strataWarm, await load(() => fetch(strataUrl, { headers })));
      floorWarm = better(floorFirst, await load(() => fetch(`http://127.0.0.1:${FLOOR_PORT}/`)));
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
