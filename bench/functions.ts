/**
 * Edge function invocations: `npm run bench:functions`. A hello-world function deployed through the
 * Management API, invoked through /functions/v1 with the anon key: warm (one warm worker, concurrent
 * clients: req/s, p50/p99) and cold (each invocation right after a redeploy starts a new worker: p50/p99).
 */
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startStrata, type RunningStrata } from "../src/app";
import { loadConfig } from "../src/config";
import { createLogger } from "../src/log";
import { CONCURRENCY, DURATION_MS, load } from "./harness";

const COLD_STARTS = Number(process.env.BENCH_COLD_STARTS ?? 20);
const TOKEN = "sbp_" + "0123456789abcdef".repeat(2) + "01234567";

async function deployHello(strata: RunningStrata, revision: number) {
  const form = new FormData();
  form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: "hello" }));
  const source = `Deno.serve(() => Response.json({ message: "Hello world", revision: ${revision} }))`;
  form.append("file", new Blob([source]), "index.ts");
  const res = await fetch(
    `http://127.0.0.1:${strata.port}/v1/projects/${strata.info.ref}/functions/deploy?slug=hello`,
    {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
      body: form,
    },
  );
  if (res.status !== 201) throw new Error(`deploy failed: ${res.status} ${await res.text()}`);
}

function invoke(strata: RunningStrata) {
  return fetch(`http://127.0.0.1:${strata.port}/functions/v1/hello`, {
    headers: { apikey: strata.info.anon_key, authorization: `Bearer ${strata.info.anon_key}` },
  });
}

async function main() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "strata-bench-"));
  const strata = await startStrata(
    loadConfig({
      ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
      PORT: "0",
      STRATA_DATA_DIR: dir,
      STRATA_PG_PORT: "54991",
      MANAGEMENT_TOKEN: TOKEN,
      MANAGEMENT_RATE_LIMIT: "100000",
      LOG_LEVEL: "silent",
    }),
    createLogger("silent"),
  );
  try {
    const cold: number[] = [];
    for (let i = 1; i <= COLD_STARTS; i++) {
      await deployHello(strata, i);
      const t = performance.now();
      const res = await invoke(strata);
      const body = (await res.json()) as { revision?: number };
      if (body.revision !== i) throw new Error(`cold start ${i} answered ${JSON.stringify(body)}`);
      cold.push(performance.now() - t);
    }
    cold.sort((a, b) => a - b);
    const pct = (p: number) => cold[Math.min(cold.length - 1, Math.floor(cold.length * p))].toFixed(1);
    const warm = await load(() => invoke(strata));
    console.log(
      `Functions bench: hello world, ${CONCURRENCY} concurrent clients, ${DURATION_MS / 1000}s warm\n`,
    );
    console.log(
      `warm  ${warm.rps.toFixed(0)} invocations/s  p50 ${warm.p50.toFixed(1)} ms  p99 ${warm.p99.toFixed(1)} ms`,
    );
    console.log(
      `cold  ${COLD_STARTS} first invocations after a deploy  p50 ${pct(0.5)} ms  p99 ${pct(0.99)} ms`,
    );
  } finally {
    await strata.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
