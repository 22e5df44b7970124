import { buildSchema } from "grafast/graphql";
import { loadConfig } from "../../src/config";
import { pgGqlDocument } from "../../plugins/PgGqlDocumentPlugin";
import { PG_GQL_LIMITS } from "../../plugins/PgGqlLimitsPlugin";
import { startTestServer, type TestServer } from "../helpers/server";
import { migrate } from "./client";

/**
 * One document must not hold the server: a document beyond the limits (PgGqlLimitsPlugin) is refused before it
 * is validated or planned, while other clients are served. No timings: each bomb's answer is its refusal, and a
 * normal query sent while the bombs are in flight is answered.
 */

const SCHEMA = `
  comment on schema public is '@graphql({"inflect_names": true})';
  create table account(id int primary key, email text not null);
  create table blog(id int primary key, owner_id int not null references account(id), title text not null);
  insert into account values (1, 'a@example.com');
  insert into blog values (1, 1, 'hello');
  create table thread(id int primary key, parent_id int references thread(id));
  insert into thread values (1, null);
  grant select on account, blog, thread to anon;`;

const NORMAL = "{ blogCollection { edges { node { title owner { email } } } } }";
const NORMAL_ANSWER = {
  data: { blogCollection: { edges: [{ node: { title: "hello", owner: { email: "a@example.com" } } }] } },
};

/** `n` aliases of a collection, as the reported document had (10,000 of them are about 600 KB). */
const aliases = (n: number, selection = "blogCollection { edges { node { id title } } }") =>
  `{ ${Array.from({ length: n }, (_, i) => `a${i}: ${selection}`).join(" ")} }`;

/** Blogs and their owners nested `levels` times: 4 levels of fields each, 4 more around and under them. */
function nested(levels: number): string {
  let inner = "title";
  for (let i = 0; i < levels; i++) inner = `owner { blogCollection { edges { node { ${inner} } } } }`;
  return `{ blogCollection { edges { node { ${inner} } } } }`;
}

/** Threads' replies nested `levels` times (3 levels of fields each), 3 levels of planning apiece for grafast. */
function replies(levels: number): string {
  let inner = "id";
  for (let i = 0; i < levels; i++) inner = `threadCollection { edges { node { ${inner} } } }`;
  return `{ ${inner} }`;
}

/** Fragments spreading the one below ten times each: `levels` of them select 2·10^levels fields written out. */
function fragmentBomb(levels: number): string {
  const fragments = [`fragment F0 on Blog { id title }`];
  for (let i = 1; i <= levels; i++) {
    fragments.push(
      `fragment F${i} on Blog { ${Array(10)
        .fill(`...F${i - 1}`)
        .join(" ")} }`,
    );
  }
  return `{ blogCollection { edges { node { ...F${levels} } } } } ${fragments.join(" ")}`;
}

describe("GraphQL document limits", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  const post = async (body: string) => {
    const res = await fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body,
    });
    const text = await res.text();
    return { status: res.status, body: text.startsWith("{") ? (JSON.parse(text) as unknown) : text };
  };
  const ask = (query: string) => post(JSON.stringify({ query }));
  const refusal = (message: RegExp) => ({
    status: 200,
    body: { errors: [{ message: expect.stringMatching(message) }] },
  });

  it("refuses a 10,000-alias document at once while a concurrent query is answered", async () => {
    const bomb = aliases(10_000);
    expect(bomb.length).toBeGreaterThan(450_000);
    const bombs = [ask(bomb), ask(bomb), ask(bomb)];
    const normal = await ask(NORMAL);
    expect(normal).toEqual({ status: 200, body: NORMAL_ANSWER });
    // Every bomb stopped at the parser: 10,000 aliases are more tokens than a document may have.
    for (const answer of await Promise.all(bombs)) {
      expect(answer).toEqual({
        status: 200,
        body: {
          data: null,
          errors: [{ message: expect.stringMatching(/more that 15000 tokens\. Parsing aborted/) }],
        },
      });
    }
  });

  it("refuses documents beyond the depth, alias and field limits before validating them", async () => {
    const bombs: [string, RegExp][] = [
      [nested(8), /^The operation nests fields more than 32 deep$/],
      [aliases(101, "__typename"), /^The operation has more than 100 aliases$/],
      // No alias: graphql-js compares every pair of same-named fields when it validates them.
      [`{ ${Array(1001).fill("__typename").join(" ")} }`, /^The operation selects more than 1000 fields/],
      // Twenty billion fields written out, measured in one pass over the fragments.
      [
        fragmentBomb(10),
        /^The operation selects more than 1000 fields \(a fragment counts at every spread\)$/,
      ],
      [
        `query Deep { ...Q } fragment Q on Query { ${nested(8).slice(1, -1)} }`,
        /^Operation "Deep" nests fields more than 32 deep$/,
      ],
      // An unused fragment is validated too.
      [
        `{ __typename } fragment Wide on Query { ${aliases(101, "__typename").slice(1, -1)} }`,
        /^Fragment "Wide"/,
      ],
    ];
    const answers = Promise.all(bombs.map(([query]) => ask(query)));
    expect(await ask(NORMAL)).toEqual({ status: 200, body: NORMAL_ANSWER });
    const refused = await answers;
    bombs.forEach(([, message], i) => expect(refused[i]).toEqual(refusal(message)));
  });

  it("answers documents within the limits, pg_graphql's 28-deep regression case included", async () => {
    // pg_graphql's issue_fragment_spread_cycles case: blogs and owners nested through a fragment, 28 deep.
    const deep = await ask(nested(6));
    expect(deep.status).toBe(200);
    let node = (deep.body as any).data.blogCollection.edges[0].node;
    for (let i = 0; i < 6; i++) node = node.owner.blogCollection.edges[0].node;
    expect(node).toEqual({ title: "hello" });
    // 31 deep: more planning layers than grafast's default bound (100), which the preset raises behind maxDepth.
    expect(await ask(replies(10))).toMatchObject({ status: 200, body: { data: { threadCollection: {} } } });
    const hundred = await ask(aliases(100, "__typename"));
    expect(hundred).toEqual({
      status: 200,
      body: { data: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`a${i}`, "Query"])) },
    });
    expect(await ask(fragmentBomb(2))).toMatchObject({ status: 200, body: { data: { blogCollection: {} } } });
  });

  it("answers a spread cycle as pg_graphql does, without measuring it forever", async () => {
    const cycle = "{ ...A } fragment A on Query { __typename ...B } fragment B on Query { __typename ...A }";
    expect(await ask(cycle)).toEqual({
      status: 200,
      body: { errors: [{ message: "Found a cycle between fragments" }] },
    });
  });

  it("refuses a body over 5 MB with 413 before reading it, while a concurrent query is answered", async () => {
    const huge = JSON.stringify({ query: `{ __typename } # ${"x".repeat(6 * 1024 * 1024)}` });
    const refused = post(huge);
    expect(await ask(NORMAL)).toEqual({ status: 200, body: NORMAL_ANSWER });
    expect(await refused).toEqual({
      status: 413,
      body: { message: "Bad request: request entity too large" },
    });
  });
});

describe("GraphQL document limits from the environment", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ GRAPHQL_MAX_TOKENS: "1000000", GRAPHQL_MAX_DEPTH: "12" });
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  const ask = async (query: string) =>
    (
      await fetch(`${server.url}/graphql/v1`, {
        method: "POST",
        headers: { apikey: server.anonKey, "content-type": "application/json" },
        body: JSON.stringify({ query }),
      })
    ).json();

  it("applies GRAPHQL_MAX_* over the preset's limits and keeps the preset's others", async () => {
    // Past the raised token limit, the preset's alias and field limits refuse the 10,000 aliases.
    expect(await ask(aliases(10_000))).toEqual({
      errors: [
        { message: "The operation has more than 100 aliases" },
        { message: "The operation selects more than 1000 fields (a fragment counts at every spread)" },
      ],
    });
    expect(await ask(nested(3))).toEqual({
      errors: [{ message: "The operation nests fields more than 12 deep" }],
    });
    expect(await ask(nested(2))).toMatchObject({ data: { blogCollection: {} } });
  });

  it("stops start-up on a limit that is not a positive whole number", () => {
    for (const value of ["0", "-1", "2.5", "many"]) {
      expect(() => loadConfig({ GRAPHQL_MAX_ALIASES: value })).toThrow(
        /GRAPHQL_MAX_ALIASES must be a positive whole number/,
      );
    }
  });
});

describe("prepared documents", () => {
  it("are kept per schema: a repeated document is the same operation, whose grafast plans are reused", () => {
    const schema = buildSchema("type Query { a: Int }");
    const first = pgGqlDocument(schema, "{ a }", PG_GQL_LIMITS);
    expect(pgGqlDocument(schema, "{ a }", PG_GQL_LIMITS)).toBe(first);
    expect(pgGqlDocument(schema, "{ b: a }", PG_GQL_LIMITS)).not.toBe(first);
  });
});
