/** REST throughput against a raw-SQL floor, in one run: `npm run bench:rest` (see bench/harness.ts). */
import type { RunningStrata } from "../src/app";
import { runBench, type Shape } from "./harness";

let nextId = 1_000_000;
const get = (path: string) => (strata: RunningStrata) =>
  fetch(`http://127.0.0.1:${strata.port}/rest/v1${path}`, { headers: { apikey: strata.info.anon_key } });

const SHAPES: Shape[] = [
  {
    name: "flat list (20 rows)",
    strata: get("/authors?select=id,name&order=id&limit=20"),
    floorSql:
      "select coalesce(json_agg(t), '[]')::text from (select id, name from authors order by id limit 20) t",
  },
  {
    name: "embedded list (20 rows x 5 children)",
    strata: get("/authors?select=id,name,books(id,title)&order=id&limit=20&books.order=id&books.limit=5"),
    floorSql: `select coalesce(json_agg(t), '[]')::text from (
      select a.id, a.name, coalesce((select json_agg(b) from (select id, title from books where author_id = a.id order by id limit 5) b), '[]') as books
      from authors a order by a.id limit 20) t`,
  },
  {
    name: "insert one row",
    strata: (strata) =>
      fetch(`http://127.0.0.1:${strata.port}/rest/v1/books`, {
        method: "POST",
        headers: { apikey: strata.info.anon_key, "content-type": "application/json" },
        body: JSON.stringify({ id: nextId++, title: "bench", author_id: 1 }),
      }),
    floorSql: "insert into books (id, title, author_id) values ($1, 'bench', 1)",
    floorParams: () => [nextId++],
  },
];

runBench("REST bench", SHAPES).catch((e) => {
  console.error(e);
  process.exit(1);
});
