/**
 * GraphQL throughput and latency against a raw-SQL floor, on the same database, in one run.
 *
 *   BENCH_DB=<superuser URL> BENCH_URL=http://host:port/graphql/v1 BENCH_APIKEY=<anon key> \
 *     npm run bench:graphql
 *
 * Seeds `bench_blog` (1000 rows) and `bench_post` (5 per blog) in `public`, then measures three
 * shapes through Strata and through a floor server that answers the same JSON with one hand-written
 * SQL statement per request. Prints req/s, p50/p99 and the ratio Strata/floor.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";

const DURATION_MS = Number(process.env.BENCH_SECONDS ?? 5) * 1000;
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);

interface Shape {
  name: string;
  graphql: string;
  /** One SQL statement returning the same JSON document as `graphql`. */
  sql: string;
}

const CURSOR = Buffer.from("[500]").toString("base64");

const SHAPES: Shape[] = [
  {
    name: "flat page of 20",
    graphql: `{ benchBlogCollection(first: 20) { edges { node { id name } } } }`,
    sql: `select json_build_object('data', json_build_object('benchBlogCollection', json_build_object('edges',
            coalesce(json_agg(json_build_object('node', json_build_object('id', b.id, 'name', b.name)) order by b.id), '[]'))))
          from (select id, name from bench_blog order by id limit 20) b`,
  },
  {
    name: "20 rows with 5 children each",
    graphql: `{ benchBlogCollection(first: 20) { edges { node { id name benchPostCollection(first: 5) { edges { node { id title } } } } } } }`,
    sql: `select json_build_object('data', json_build_object('benchBlogCollection', json_build_object('edges',
            coalesce(json_agg(json_build_object('node', json_build_object('id', b.id, 'name', b.name,
              'benchPostCollection', json_build_object('edges', (
                select coalesce(json_agg(json_build_object('node', json_build_object('id', p.id, 'title', p.title)) order by p.id), '[]')
                from (select id, title from bench_post where blog_id = b.id order by id limit 5) p)))) order by b.id), '[]'))))
          from (select id, name from bench_blog order by id limit 20) b`,
  },
  {
    name: "filtered, ordered page after a cursor",
    graphql: `{ benchBlogCollection(first: 20, after: "${CURSOR}", filter: { name: { like: "blog 1%" } }, orderBy: [{ id: AscNullsLast }]) { edges { cursor node { id name } } } }`,
    sql: `select json_build_object('data', json_build_object('benchBlogCollection', json_build_object('edges',
            coalesce(json_agg(json_build_object('cursor', translate(encode(convert_to(jsonb_build_array(b.id)::text, 'utf-8'), 'base64'), E'\\n', ''),
              'node', json_build_object('id', b.id, 'name', b.name)) order by b.id), '[]'))))
          from (select id, name from bench_blog where name like 'blog 1%' and id > 500 order by id limit 20) b`,
  },
];

async function seed(pool: pg.Pool): Promise<void> {
  await pool.query(`
    create table if not exists bench_blog(id int primary key, name text not null);
    create table if not exists bench_post(id int primary key, blog_id int not null references bench_blog(id), title text not null);
    create index if not exists bench_post_blog on bench_post(blog_id);
    insert into bench_blog select i, 'blog ' || i from generate_series(1, 1000) i on conflict do nothing;
    insert into bench_post select i, (i - 1) / 5 + 1, 'post ' || i from generate_series(1, 5000) i on conflict do nothing;
    grant select on bench_blog, bench_post to anon, authenticated;`);
}

/** The floor: node http + one prepared statement per request. */
function floorServer(pool: pg.Pool): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const shape = SHAPES[Number(new URL(req.url ?? "/", "http://x").searchParams.get("shape"))];
    req.resume();
    pool
      .query({ name: `bench_${shape.name}`, text: shape.sql })
      .then(({ rows }) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(rows[0].json_build_object));
      })
      .catch((e: Error) => {
        res.writeHead(500);
        res.end(e.message);
      });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
}

async function measure(send: () => Promise<Response>): Promise<Measurement> {
  const latencies: number[] = [];
  const end = Date.now() + DURATION_MS;
  const worker = async () => {
    while (Date.now() < end) {
      const start = performance.now();
      const res = await send();
      await res.text();
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      latencies.push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { rps: latencies.length / (DURATION_MS / 1000), p50: at(0.5), p99: at(0.99) };
}

async function main(): Promise<void> {
  const { BENCH_DB, BENCH_URL, BENCH_APIKEY } = process.env;
  if (!BENCH_DB || !BENCH_URL || !BENCH_APIKEY) {
    throw new Error("Set BENCH_DB (superuser URL), BENCH_URL (…/graphql/v1) and BENCH_APIKEY (anon key)");
  }
  const pool = new pg.Pool({ connectionString: BENCH_DB, max: CONCURRENCY });
  await seed(pool);
  const floor = await floorServer(pool);
  const floorUrl = `http://127.0.0.1:${(floor.address() as AddressInfo).port}`;
  // Let the DDL watch pick up the tables, then warm both sides.
  await new Promise((r) => setTimeout(r, 2000));
  const graphql = (query: string) => () =>
    fetch(BENCH_URL, {
      method: "POST",
      headers: { "content-type": "application/json", apiKey: BENCH_APIKEY },
      body: JSON.stringify({ query }),
    });
  const fmt = (m: Measurement) =>
    `${m.rps.toFixed(0).padStart(6)} req/s  p50 ${m.p50.toFixed(1)} ms  p99 ${m.p99.toFixed(1)} ms`;
  for (const [index, shape] of SHAPES.entries()) {
    const strata = graphql(shape.graphql);
    const raw = () => fetch(`${floorUrl}/?shape=${index}`);
    const [a, b] = [await (await strata()).json(), await (await raw()).json()];
    if (JSON.stringify(a) !== JSON.stringify(b)) {
      throw new Error(
        `${shape.name}: Strata and the floor disagree:\n${JSON.stringify(a)}\n${JSON.stringify(b)}`,
      );
    }
    const s = await measure(strata);
    const f = await measure(raw);
    console.log(`${shape.name}`);
    console.log(`  strata ${fmt(s)}`);
    console.log(`  floor  ${fmt(f)}`);
    console.log(`  ratio  ${(s.rps / f.rps).toFixed(2)} of the floor's throughput`);
  }
  floor.close();
  await pool.end();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
