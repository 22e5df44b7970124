import { planRunnerCounts } from "../../src/graphql/planRunner";
import { startTestServer, type TestServer } from "../helpers/server";
import { migrate, userToken } from "./client";

/**
 * Queries answered by the plan runner (src/graphql/planRunner.ts) must be answered byte for byte as grafast's
 * engine answers them. Two servers with the same schema and rows: one with the runner (the default), one
 * with `STRATA_GRAPHQL_PLAN_RUNNER=off`; every document of the corpus goes to both, twice, as each role.
 */
const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true})';
  create type mood as enum ('happy', 'sad');
  create table author(
    id serial primary key,
    name text not null,
    nick varchar(20),
    born date,
    rating numeric(5, 2),
    score float8,
    big bigint,
    active boolean not null default true,
    tags text[],
    meta jsonb,
    uid uuid,
    feeling mood,
    joined timestamptz,
    owner_id uuid
  );
  create table book(
    id serial primary key,
    author_id int references author(id),
    title text not null,
    pages int,
    published timestamp
  );
  comment on table author is '@graphql({"totalCount": {"enabled": true}, "aggregate": {"enabled": true}})';
  comment on table book is '@graphql({"totalCount": {"enabled": true}})';
  create function shout(a author) returns text language sql stable as $$ select upper(a.name) $$;
  create view book_title as select id, title from book;
  comment on view book_title is '@graphql({"primary_key_columns": ["id"]})';
  insert into author(name, nick, born, rating, score, big, active, tags, meta, uid, feeling, joined, owner_id) values
    ('Ann "the" Author', 'ann', '1970-01-02', 4.50, 1.5, 9007199254740993, true, '{a,b}', '{"k": [1, "x"]}',
     '00000000-0000-0000-0000-000000000001', 'happy', '2024-01-02 03:04:05.678+00', '00000000-0000-0000-0000-0000000000aa'),
    (E'Bob\\nline\\t\\u0001 \\u2028 é ☃ 😀', null, null, null, null, null, false, null, null, null, null, null,
     '00000000-0000-0000-0000-0000000000bb'),
    ('Cy', 'cy', '2001-12-31', 0.10, -2e-7, -1, true, '{}', 'null', null, 'sad', '1999-12-31 23:59:59+00', null);
  insert into book(author_id, title, pages, published) values
    (1, 'One', 100, '2020-01-01 10:00'), (1, 'Two', null, null), (2, 'Three', 300, '2021-06-30 12:30:15.5'),
    (null, 'Orphan', 5, null);
  grant select on author, book, book_title to anon, authenticated;
  grant all on author, book to service_role;
  alter table book enable row level security;
  create policy anon_books on book for select to anon using (pages is not null);
  create policy own_books on book for select to authenticated
    using (author_id in (select id from author where owner_id = auth.uid()));
  create policy all_books on book for select to service_role using (true);
`;

interface Case {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
}

const CORPUS: Case[] = [
  { query: "{ __typename }" },
  {
    query: `{ authorCollection(orderBy: [{id: AscNullsLast}]) { __typename totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
        edges { __typename cursor node { __typename nodeId id name nick born rating score big active tags meta uid feeling joined shout } } } }`,
  },
  {
    query: `query Page($n: Int, $after: Cursor) { bookCollection(first: $n, after: $after, orderBy: [{title: DescNullsFirst}]) {
        pageInfo { hasNextPage endCursor } edges { cursor node { id title pages published author { id name } } } } }`,
    variables: { n: 2 },
  },
  {
    query: `query F($t: String, $p: Int) { bookCollection(filter: {or: [{title: {eq: $t}}, {pages: {gt: $p}}]}, first: 10) {
        totalCount edges { node { id title author { name books: bookCollection { edges { node { title } } } } } } } }`,
    variables: { t: "Two", p: 150 },
  },
  {
    query: `query F($t: String, $p: Int) { bookCollection(filter: {or: [{title: {eq: $t}}, {pages: {gt: $p}}]}, first: 10) {
        totalCount edges { node { id title author { name books: bookCollection { edges { node { title } } } } } } } }`,
    variables: { t: null, p: 0 },
  },
  {
    query: `query($id: Int!) { authorByPk: authorCollection(filter: {id: {eq: $id}}) { edges { node { id name bookCollection(first: 1) { edges { node { title } } } } } } }`,
    variables: { id: 2 },
  },
  {
    query: `{ authorCollection(first: 2) { edges { node { ...A } } } } fragment A on Author { id ... on Author { name } n2: name __typename }`,
  },
  { query: "query A { a: __typename } query B { b: bookCollection { totalCount } }", operationName: "B" },
  { query: "{ bookTitleCollection(orderBy: [{id: DescNullsLast}]) { edges { node { id title } } } }" },
  {
    query:
      "{ authorCollection { aggregate { count sum { rating } avg { score } min { born } max { name } } } }",
  },
  // Variables: defaults, absent ones, values a scalar refuses.
  ...[{}, { n: 1, t: "One" }, { n: 1.5 }, { t: 7 }, { n: null }, { t: null }].map((variables) => ({
    query: `query V($n: Int = 2, $t: String) { bookCollection(first: $n, filter: {title: {eq: $t}}) {
        totalCount edges { node { title } } } }`,
    variables,
  })),
  // Variables the plan depends on, @skip/@include, node lookups: grafast's own path.
  {
    query: `query S($s: Boolean!) { authorCollection { edges { node { id name @skip(if: $s) } } } }`,
    variables: { s: true },
  },
  {
    query: `query($i: ID!) { node(nodeId: $i) { __typename ... on Author { name } } }`,
    variables: { i: "bad" },
  },
  // Errors: variables that do not coerce, an unknown field, a failing statement.
  { query: `query($n: Int) { bookCollection(first: $n) { totalCount } }`, variables: { n: "x" } },
  { query: "{ authorCollection { edges { node { nope } } } }" },
  { query: `query($n: Int) { bookCollection(first: $n) { totalCount } }`, variables: { n: -1 } },
];

async function post(server: TestServer, c: Case, auth: { key: string; token?: string }) {
  const headers: Record<string, string> = { "content-type": "application/json", apikey: auth.key };
  if (auth.token) headers.authorization = `Bearer ${auth.token}`;
  const res = await fetch(`${server.url}/graphql/v1`, { method: "POST", headers, body: JSON.stringify(c) });
  return `${res.status} ${await res.text()}`;
}

/** A role's key (and, for a signed-in user, the token of the user whose books RLS shows) on `server`. */
async function credentials(server: TestServer, role: "anon" | "service_role" | "authenticated") {
  return {
    key: role === "service_role" ? server.serviceKey : server.anonKey,
    token:
      role === "authenticated" ? await userToken(server, "00000000-0000-0000-0000-0000000000aa") : undefined,
  };
}

describe("GraphQL plan runner", () => {
  let withRunner: TestServer;
  let engineOnly: TestServer;
  beforeAll(async () => {
    [withRunner, engineOnly] = await Promise.all([
      startTestServer(),
      startTestServer({ STRATA_GRAPHQL_PLAN_RUNNER: "off" }),
    ]);
    await Promise.all([migrate(withRunner, SCHEMA), migrate(engineOnly, SCHEMA)]);
  });
  afterAll(() => Promise.all([withRunner?.stop(), engineOnly?.stop()]));

  it("answers every query exactly as grafast's engine does, for each role", async () => {
    const before = { ...planRunnerCounts };
    for (const role of ["anon", "service_role", "authenticated"] as const) {
      for (const c of CORPUS) {
        for (let round = 0; round < 2; round++) {
          const [a, b] = [
            await post(withRunner, c, await credentials(withRunner, role)),
            await post(engineOnly, c, await credentials(engineOnly, role)),
          ];
          expect({ role, round, query: c.query, variables: c.variables, answer: a }).toEqual({
            role,
            round,
            query: c.query,
            variables: c.variables,
            answer: b,
          });
        }
      }
    }
    // The runner answered most of them (not the ones grafast must: plan constraints, node, errors).
    expect(planRunnerCounts.answered - before.answered).toBeGreaterThanOrEqual(3 * 2 * 12);
    expect(planRunnerCounts.gaveUp - before.gaveUp).toBeLessThanOrEqual(3 * 2 * 2);
  });

  it("reads rows as the request's role: grants and row level security decide", async () => {
    const query = { query: "{ bookCollection(orderBy: [{id: AscNullsLast}]) { edges { node { title } } } }" };
    const titles = async (auth: { key: string; token?: string }) =>
      (
        JSON.parse((await post(withRunner, query, auth)).slice(4)) as {
          data: { bookCollection: { edges: { node: { title: string } }[] } };
        }
      ).data.bookCollection.edges.map((e) => e.node.title);
    const before = planRunnerCounts.answered;
    const ann = await userToken(withRunner, "00000000-0000-0000-0000-0000000000aa");
    const bob = await userToken(withRunner, "00000000-0000-0000-0000-0000000000bb");
    // What psql sees of each policy.
    const byPolicy = await withRunner.sql("select title from book where pages is not null order by id");
    expect(await titles({ key: withRunner.anonKey })).toEqual(
      byPolicy.rows.map((r: { title: string }) => r.title),
    );
    expect(await titles({ key: withRunner.anonKey, token: ann })).toEqual(["One", "Two"]);
    expect(await titles({ key: withRunner.anonKey, token: bob })).toEqual(["Three"]);
    expect(await titles({ key: withRunner.serviceKey })).toEqual(["One", "Two", "Three", "Orphan"]);
    // Alternating roles on one document: nothing of one request's role is kept for the next.
    expect(await titles({ key: withRunner.anonKey, token: ann })).toEqual(["One", "Two"]);
    expect(planRunnerCounts.answered - before).toBe(5);
  });

  it("leaves every request to grafast's engine with STRATA_GRAPHQL_PLAN_RUNNER=off", async () => {
    const query = { query: "{ bookCollection { edges { node { title } } } }" };
    const before = { ...planRunnerCounts };
    const answer = await post(engineOnly, query, { key: engineOnly.serviceKey });
    expect(answer).toMatch(/^200 \{"data":\{"bookCollection"/);
    // The runner neither answered nor looked at it.
    expect(planRunnerCounts).toEqual(before);
  });
  it("runs mutations as grafast's engine does: the same answers, the same rows, nothing written twice", async () => {
    const before = { ...planRunnerCounts };
    const mutations: Case[] = [
      {
        query: `mutation($t: String!) { insertIntoBookCollection(objects: [{title: $t, pages: 7, authorId: 1}, {title: "B2"}]) {
            affectedCount records { id title pages author { name } } } }`,
        variables: { t: "New" },
      },
      { query: `mutation { insertIntoBookCollection(objects: [{title: "Alone"}]) { affectedCount } }` },
      {
        query: `mutation($p: Int) { updateBookCollection(set: {pages: $p}, filter: {title: {in: ["New", "B2"]}}, atMost: 2) {
            affectedCount records { __typename title pages } } }`,
        variables: { p: 9 },
      },
      // More rows than atMost, a unique violation, a null in a not-null column: errors, nothing written.
      {
        query: `mutation { updateBookCollection(set: {pages: 1}, filter: {pages: {gt: 0}}) { affectedCount } }`,
      },
      { query: `mutation { insertIntoBookCollection(objects: [{id: 1, title: "Dup"}]) { records { id } } }` },
      {
        query: `mutation { a: insertIntoBookCollection(objects: [{title: "First"}]) { records { title } }
            b: updateBookCollection(set: {title: null}, filter: {id: {eq: 2}}) { records { title } } }`,
      },
      // Two fields, one after the other in one transaction.
      {
        query: `mutation { a: deleteFromBookCollection(filter: {title: {eq: "B2"}}) { records { title } }
            b: updateBookCollection(set: {title: "Renamed"}, filter: {title: {eq: "New"}}) { affectedCount records { title } } }`,
      },
    ];
    for (const c of mutations) {
      const [a, b] = [
        await post(withRunner, c, { key: withRunner.serviceKey }),
        await post(engineOnly, c, { key: engineOnly.serviceKey }),
      ];
      expect({ query: c.query, answer: a }).toEqual({ query: c.query, answer: b });
    }
    // The rows each server holds afterwards, read through psql.
    const rows = "select id, title, pages, author_id from book order by id";
    expect((await withRunner.sql(rows)).rows).toEqual((await engineOnly.sql(rows)).rows);
    expect((await withRunner.sql("select count(*)::int as n from book")).rows[0].n).toBe(6);
    expect(planRunnerCounts.answered - before.answered).toBeGreaterThanOrEqual(4);
  });
});
