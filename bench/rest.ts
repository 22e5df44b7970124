/**
 * REST throughput against a raw-SQL floor, in one run: `npm run bench:rest`.
 *
 * Starts a PostgreSQL (embedded in a temporary directory, or DATABASE_URL's cluster), seeds one dataset,
 * then measures the same three request shapes against Strata's /rest/v1 and against a minimal node:http
 * server that answers each with one hand-written SQL statement returning the same JSON. Loops are bounded
 * in count and time and talk to 127.0.0.1 only. Prints req/s, p50 and p99 and the ratio to the floor.
 */
import { mkdtempSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { startStrata } from "../src/app";
import { loadConfig } from "../src/config";
import { startEmbeddedPostgres } from "../src/db/embedded";
import { withDatabase } from "../src/db/urls";
import { createLogger } from "../src/log";

const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const MAX_REQUESTS = 200_000;

interface Shape {
  name: string;
  strata: { method: string; path: string; body?: string; headers?: Record<string, string> };
  floorSql: string;
  floorParams?: () => unknown[];
}

let nextId = 1_000_000;
const SHAPES: Shape[] = [
  {
    name: "flat list (20 rows)",
    strata: { method: "GET", path: "/rest/v1/authors?select=id,name&order=id&limit=20" },
    floorSql:
      "select coalesce(json_agg(t), '[]')::text as body from (select id, name from authors order by id limit 20) t",
  },
  {
    name: "embedded list (20 rows x 5 children)",
    strata: {
      method: "GET",
      path: "/rest/v1/authors?select=id,name,books(id,title)&order=id&limit=20&books.order=id&books.limit=5",
    },
    floorSql: `select coalesce(json_agg(t), '[]')::text as body from (
      select a.id, a.name, coalesce((select json_agg(b) from (select id, title from books where author_id = a.id order by id limit 5) b), '[]') as books
      from authors a order by a.id limit 20) t`,
  },
  {
    name: "insert one row",
    strata: { method: "POST", path: "/rest/v1/books", headers: { "content-type": "application/json" } },
    floorSql: "insert into books (id, title, author_id) values ($1, 'bench', 1)",
    floorParams: () => [nextId++],
  },
];

async function seed(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`
    drop table if exists books; drop table if exists authors;
    create table authors (id int primary key, name text not null);
    create table books (id int primary key, title text not null, author_id int references authors);
    create index on books (author_id);
    insert into authors select g, 'author ' || g from generate_series(1, 1000) g;
    insert into books select g, 'book ' || g, 1 + (g % 1000) from generate_series(1, 10000) g;
    analyze;`);
  await client.end();
}

function floorServer(url: string): Promise<{ port: number; close(): void }> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const server = http.createServer(async (req, res) => {
    const shape = SHAPES.find((s) => req.url === `/${encodeURIComponent(s.name)}`)!;
    req.resume();
    const { rows } = await pool.query(shape.floorSql, shape.floorParams?.() ?? []);
    res.writeHead(shape.strata.method === "POST" ? 201 : 200, { "content-type": "application/json" });
    res.end(rows[0]?.body ?? "");
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

async function load(send: () => Promise<Response>) {
  const latencies: number[] = [];
  const end = Date.now() + DURATION_MS;
  const worker = async () => {
    while (Date.now() < end && latencies.length < MAX_REQUESTS) {
      const t = performance.now();
      const res = await send();
      await res.arrayBuffer();
      if (res.status >= 400) throw new Error(`bench request failed with ${res.status}`);
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

async function main() {
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
  await seed(url);
  const floor = await floorServer(url);
  const apikey = strata.info.anon_key;
  console.log(`REST bench: ${CONCURRENCY} concurrent clients, ${DURATION_MS / 1000}s per shape\n`);
  console.log(
    "shape".padEnd(40),
    "strata req/s  p50/p99 ms".padEnd(28),
    "floor req/s  p50/p99 ms".padEnd(28),
    "ratio",
  );
  for (const shape of SHAPES) {
    const body = () =>
      shape.strata.method === "POST"
        ? JSON.stringify({ id: nextId++, title: "bench", author_id: 1 })
        : undefined;
    const s = await load(() =>
      fetch(`http://127.0.0.1:${strata.port}${shape.strata.path}`, {
        method: shape.strata.method,
        headers: { apikey, ...shape.strata.headers },
        body: body(),
      }),
    );
    const f = await load(() =>
      fetch(`http://127.0.0.1:${floor.port}/${encodeURIComponent(shape.name)}`, {
        method: shape.strata.method,
      }),
    );
    const fmt = (r: { rps: number; p50: number; p99: number }) =>
      `${r.rps.toFixed(0).padStart(7)}  ${r.p50.toFixed(1)}/${r.p99.toFixed(1)}`.padEnd(28);
    console.log(shape.name.padEnd(40), fmt(s), fmt(f), (s.rps / f.rps).toFixed(2));
  }
  floor.close();
  await strata.stop();
  await embedded?.stop();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
