/**
 * How long `npm start` takes to answer `GET /health` with 200: run as a user runs it (npm, its prestart step
 * included) in this checkout, on an embedded PostgreSQL in a new temporary data directory (the first start of a
 * fresh clone: initdb, the bootstrap, the first-start rows), then again on the same directory (a restart).
 * Prints both times in milliseconds. `--runs N` repeats the pair (default 3) and prints each and the median.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createServer } from "node:net";
import { argument } from "./process";

const ROOT = path.resolve(__dirname, "..");

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

async function healthyAfter(dataDir: string): Promise<number> {
  const port = await freePort();
  const pgPort = await freePort();
  const started = performance.now();
  const child = spawn("npm", ["start", "--silent"], {
    cwd: ROOT,
    env: {
      ...process.env,
      STRATA_DATA_DIR: dataDir,
      PORT: String(port),
      STRATA_PG_PORT: String(pgPort),
      LOG_LEVEL: "warn",
    },
    stdio: "ignore",
    detached: true,
  });
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return performance.now() - started;
      if (performance.now() - started > 120_000) throw new Error("no healthy answer within 120 s");
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    // npm, its shell and the server are one process group: stop them together, the database with them.
    const exited = new Promise((r) => child.once("exit", r));
    process.kill(-child.pid!, "SIGTERM");
    await exited;
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function main(): Promise<void> {
  const runs = Number(argument("runs", "3"));
  const first: number[] = [];
  const again: number[] = [];
  for (let i = 0; i < runs; i++) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "strata-startup-"));
    try {
      first.push(await healthyAfter(dataDir));
      again.push(await healthyAfter(dataDir));
      console.log(`run ${i + 1}: first start ${first[i].toFixed(0)} ms, restart ${again[i].toFixed(0)} ms`);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `startup: first start median ${median(first).toFixed(0)} ms, restart median ${median(again).toFixed(0)} ms`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
