/** GraphQL throughput against a raw-SQL floor, in one run: `npm run bench:graphql` (see bench/harness.ts). */
import type { RunningStrata } from "../src/app";
import { runBench, type Shape } from "./harness";

const query = (text: string) => (strata: RunningStrata) =>
  fetch(`http://127.0.0.1:${strata.port}/graphql/v1`, {
    method: "POST",
    headers: { apiKey: strata.info.anon_key, "content-type": "application/json" },
    body: JSON.stringify({ query: text }),
  });

// A cursor after the 100th row in the order of the filtered shape: base64 of pg_graphql's [year, id] array.
const AFTER = Buffer.from("[1960, 100]").toString("base64");

const SHAPES: Shape[] = [
  {
    name: "flat page of 20",
    strata: query("{ authorsCollection(first: 20) { edges { node { id name } } } }"),
    floorSql: `select json_build_object('data', json_build_object('authorsCollection', json_build_object('edges',
      coalesce(json_agg(json_build_object('node', json_build_object('id', a.id, 'name', a.name)) order by a.id), '[]'))))::text
      from (select * from authors order by id limit 20) a`,
  },
  {
    name: "20 rows x 5 children",
    strata: query(
      "{ authorsCollection(first: 20) { edges { node { id name booksCollection(first: 5) { edges { node { id title } } } } } } }",
    ),
    floorSql: `select json_build_object('data', json_build_object('authorsCollection', json_build_object('edges',
      coalesce(json_agg(json_build_object('node', json_build_object('id', a.id, 'name', a.name, 'booksCollection',
        json_build_object('edges', (select coalesce(json_agg(json_build_object('node', json_build_object('id', b.id, 'title', b.title)) order by b.id), '[]')
          from (select * from books where author_id = a.id order by id limit 5) b)))) order by a.id), '[]'))))::text
      from (select * from authors order by id limit 20) a`,
  },
  {
    name: "filtered, ordered page after a cursor",
    strata: query(
      `{ booksCollection(first: 20, after: "${AFTER}", filter: { year: { gte: 1960 } }, orderBy: [{ year: AscNullsLast }]) { pageInfo { hasNextPage endCursor } edges { cursor node { id title year } } } }`,
    ),
    floorSql: `select json_build_object('data', json_build_object('booksCollection', json_build_object('edges',
      coalesce(json_agg(json_build_object('cursor', encode(convert_to(jsonb_build_array(b.year, b.id)::text, 'utf8'), 'base64'),
        'node', json_build_object('id', b.id, 'title', b.title, 'year', b.year)) order by b.year, b.id), '[]'))))::text
      from (select * from books where year >= 1960 and (year, id) > (1960, 100) order by year, id limit 20) b`,
  },
];

runBench("GraphQL bench", SHAPES).catch((e) => {
  console.error(e);
  process.exit(1);
});
