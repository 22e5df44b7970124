/**
 * Shared benchmark harness: a PostgreSQL (embedded in a temporary directory, or DATABASE_URL's cluster),
 * one seeded dataset, Strata and a raw-SQL floor server (node:http + one hand-written statement per request)
 * on the same database, bounded load loops on 127.0.0.1, and a table of req/s, p50/p99 and ratios.
 */
import { mkdtempSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { startStrata, type RunningStrata } from "../src/app";
import { loadConfig } from "../src/config";
import { startEmbeddedPostgres } from "../src/db/embedded";
import { withDatabase } from "../src/db/urls";
import { createLogger } from "../src/log";

export const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
export const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const MAX_REQUESTS = 200_000;

export interface Shape {
  name: string;
  /** One request to Strata. */
  strata: (strata: RunningStrata) => Promise<Response>;
  /** The floor's statement and its parameters; its first column, if any, is the response body. */
  floorSql: string;
  floorParams?: () => unknown[];
}

export const SEED_SQL = `
  drop table if exists books; drop table if exists authors;
  create table authors (id int primary key, name text not null);
  create table books (id int primary key, title text not null, author_id int references authors, year int);
  create index on books (author_id);
  insert into authors select g, 'author ' || g from generate_series(1, 1000) g;
  insert into books select g, 'book ' || g, 1 + (g % 1000), 1950 + (g % 70) from generate_series(1, 10000) g;
  analyze;`;

export interface Stats {
  rps: number;
  p50: number;
  p99: number;
}

export async function load(send: () => Promise<Response>): Promise<Stats> {
  const latencies: number[] = [];
  const end = Date.now() + DURATION_MS;
  const worker = async () => {
    while (Date.now() < end && latencies.length < MAX_REQUESTS) {
      const t = performance.now();
      const res = await send();
      const text = await res.text();
      if (res.status >= 400 || text.includes('"errors"'))
        throw new Error(`bench request failed: ${res.status} ${text.slice(0, 200)}`);
      latencies.push(performance.now() - t);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))];
  return { rps: latencies.length / seconds, p50: pct(0.5), p99: pct(0.99) };
}

function floorServer(url: string, shapes: Shape[]): Promise<{ port: number; close(): void }> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const server = http.createServer(async (req, res) => {
    const shape = shapes.find((s) => req.url === `/${encodeURIComponent(s.name)}`)!;
    req.resume();
    const { rows } = await pool.query(shape.floorSql, shape.floorParams?.() ?? []);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(rows[0] ? String(Object.values(rows[0])[0]) : "");
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () => (server.close(), void pool.end()),
      }),
    ),
  );
}

/** Runs every shape against Strata and against the floor, printing one line per shape. */
export async function runBench(title: string, shapes: Shape[], extraSeedSql = ""): Promise<void> {
  let adminUrl = process.env.DATABASE_URL;
  const dir = mkdtempSync(path.join(os.tmpdir(), "strata-bench-"));
  const embedded = adminUrl ? undefined : await startEmbeddedPostgres(dir, 54990);
  adminUrl ??= embedded!.url;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query("drop database if exists strata_bench with (force)");
  await admin.query("create database strata_bench");
  await admin.end();
  const url = withDatabase(adminUrl, "strata_bench");
  const strata = await startStrata(
    loadConfig({ DATABASE_URL: url, PORT: "0", STRATA_DATA_DIR: dir, LOG_LEVEL: "silent" }),
    createLogger("silent"),
  );
  const seed = new pg.Client({ connectionString: url });
  await seed.connect();
  await seed.query(SEED_SQL + extraSeedSql);
  await seed.end();
  const floor = await floorServer(url, shapes);
  try {
    console.log(`${title}: ${CONCURRENCY} concurrent clients, ${DURATION_MS / 1000}s per shape\n`);
    console.log(
      "shape".padEnd(44),
      "strata req/s  p50/p99 ms".padEnd(28),
      "floor req/s  p50/p99 ms".padEnd(28),
      "ratio",
    );
    for (const shape of shapes) {
      const s = await load(() => shape.strata(strata));
      const f = await load(() => fetch(`http://127.0.0.1:${floor.port}/${encodeURIComponent(shape.name)}`));
      const fmt = (r: Stats) =>
        `${r.rps.toFixed(0).padStart(7)}  ${r.p50.toFixed(1)}/${r.p99.toFixed(1)}`.padEnd(28);
      console.log(shape.name.padEnd(44), fmt(s), fmt(f), (s.rps / f.rps).toFixed(2));
    }
  } finally {
    floor.close();
    await strata.stop();
    await embedded?.stop();
  }
}
