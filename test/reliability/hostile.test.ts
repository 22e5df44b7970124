import fc from "fast-check";
import { startTestServer, type TestServer } from "../helpers/server";
import { userToken, waitForTable } from "../rest/fixtures";

/**
 * Generated hostile input against every API: whatever arrives, the answer is a 2xx or a 4xx in that API's own
 * error format, never a 5xx or a dropped connection, and nothing reaches the database as SQL: a canary table
 * that the inputs keep naming in injection attempts is still there, with its row, at the end.
 */

const RUNS = Number(process.env.HOSTILE_RUNS ?? 2000);
// A fixed seed keeps CI repeatable; HOSTILE_SEED=random (or a number) explores further.
const SEED =
  process.env.HOSTILE_SEED === "random" ? Date.now() : Number(process.env.HOSTILE_SEED ?? 20261124);

/** Pieces that break naive quoting or parsing, mixed with arbitrary text (NUL and lone surrogates included). */
const nasty = fc.oneof(
  fc.constantFrom(
    "'",
    '"',
    "\\",
    ";",
    "--",
    "/*",
    "$$",
    "%",
    "_",
    "*",
    "(",
    ")",
    ",",
    ".",
    ":",
    "->",
    "->>",
    "::text",
    "\u0000",
    "ü",
    "🙂",
    "\u202e",
    "'; drop table canary; --",
    '"; drop table canary; --',
    "1); delete from canary; --",
    "9".repeat(400),
    "-1e309",
    "NaN",
    "null",
    "true",
  ),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({ maxLength: 12 }),
);
const text = fc.array(nasty, { maxLength: 4 }).map((parts) => parts.join(""));

/** A REST filter operand: an operator (real, negated or made up) and a value. */
const operator = fc.oneof(
  fc.constantFrom(
    "eq",
    "neq",
    "gt",
    "gte",
    "lt",
    "lte",
    "like",
    "ilike",
    "match",
    "imatch",
    "in",
    "is",
    "isdistinct",
    "fts",
    "plfts",
    "phfts",
    "wfts",
    "cs",
    "cd",
    "ov",
    "sl",
    "sr",
    "nxr",
    "nxl",
    "adj",
    "not.eq",
    "not.in",
    "eq(any)",
    "like(all)",
  ),
  text,
);
const column = fc.oneof(fc.constantFrom("id", "title", "views", "tags", "meta", "meta->>a", "canary"), text);
const filter = fc.tuple(column, operator, text).map(([c, o, v]) => `${c}=${o}.${v}`);

/** `or=(...)` nested `depth` deep. */
const nestedLogic = fc
  .tuple(fc.integer({ min: 1, max: 60 }), fc.constantFrom("or", "and", "not.or"), text)
  .map(([depth, op, value]) => {
    let inner = `id.eq.${value}`;
    for (let i = 0; i < depth; i++) inner = `${i % 2 ? "and" : "or"}(${inner},title.eq.x)`;
    return `${op}=(${inner})`;
  });
const select = fc
  .array(fc.oneof(column, fc.constant("posts(*)"), fc.constant("count()"), text), { maxLength: 5 })
  .map((cols) => `select=${cols.join(",")}`);
const paging = fc.oneof(
  fc
    .tuple(fc.constantFrom("limit", "offset"), fc.oneof(text, fc.bigInt().map(String)))
    .map(([k, v]) => `${k}=${v}`),
  fc
    .tuple(column, fc.constantFrom("", ".asc", ".desc", ".nullsfirst", ".x"))
    .map(([c, d]) => `order=${c}${d}`),
  fc.tuple(fc.constantFrom("on_conflict", "columns"), text).map(([k, v]) => `${k}=${v}`),
);
const queryPart = fc.oneof(filter, nestedLogic, select, paging);

/** A REST request: method, path (a real table or any name), query string, maybe a body and a Prefer. */
const restRequest = fc.record({
  method: fc.constantFrom("GET", "GET", "GET", "HEAD", "POST", "PATCH", "DELETE"),
  table: fc.oneof(fc.constantFrom("articles", "articles", "rpc/add_one", "canary"), text),
  parts: fc.array(queryPart, { maxLength: 4 }),
  encode: fc.boolean(),
  body: fc.option(fc.oneof(fc.json(), text), { nil: undefined }),
  prefer: fc.option(
    fc.constantFrom(
      "return=representation",
      "count=exact",
      "resolution=merge-duplicates",
      "tx=rollback",
      "missing=default",
    ),
    { nil: undefined },
  ),
  accept: fc.option(
    fc.constantFrom(
      "text/csv",
      "application/vnd.pgrst.object+json",
      "application/vnd.pgrst.plan",
      "application/geo+json",
      "*/*",
    ),
    { nil: undefined },
  ),
  signedIn: fc.boolean(),
});

/** Percent-encodes, byte by byte of its UTF-8 form, whatever `fetch` would refuse or change in a URL. */
function urlSafe(s: string): string {
  const keep = /[A-Za-z0-9\-._~!$&'()*+,;=:@/?]/;
  return [...Buffer.from(s, "utf8")]
    .map((b) =>
      b < 128 && keep.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `%${b.toString(16).padStart(2, "0")}`,
    )
    .join("");
}

/** Identifiers, literals and structure for GraphQL documents built from the schema's names and garbage. */
const gqlName = fc.oneof(
  fc.constantFrom(
    "articlesCollection",
    "edges",
    "node",
    "id",
    "title",
    "views",
    "totalCount",
    "pageInfo",
    "__typename",
    "__schema",
    "insertIntoArticlesCollection",
    "records",
    "affectedCount",
  ),
  fc.stringMatching(/^[_A-Za-z][_0-9A-Za-z]{0,10}$/),
);
const gqlValue = fc.oneof(
  text.map((s) => JSON.stringify(s)),
  fc.bigInt().map(String),
  fc.constantFrom(
    "1e999",
    "-0",
    "true",
    "null",
    "{eq: 1}",
    '{id: {eq: "x"}}',
    "[1, 2, 3]",
    "$v",
    "ENUM_X",
    "{or: [{id: {eq: 1}}]}",
  ),
);
const gqlSelection: fc.Arbitrary<string> = fc.letrec<{ sel: string }>((tie) => ({
  sel: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    gqlName,
    fc
      .tuple(
        fc.option(gqlName, { nil: undefined }),
        gqlName,
        fc.array(fc.tuple(gqlName, gqlValue), { maxLength: 3 }),
        fc.array(tie("sel"), { maxLength: 3 }),
      )
      .map(([alias, name, args, sub]) => {
        const a = args.length ? `(${args.map(([k, v]) => `${k}: ${v}`).join(", ")})` : "";
        return `${alias ? alias + ": " : ""}${name}${a}${sub.length ? ` { ${sub.join(" ")} }` : ""}`;
      }),
  ),
})).sel;
const deepNesting = fc.integer({ min: 1, max: 200 }).map((depth) => {
  let inner = "id";
  for (let i = 0; i < depth; i++) inner = `articlesCollection { edges { node { ${inner} } } }`;
  return `{ ${inner} }`;
});
const manyAliases = fc
  .integer({ min: 1, max: 3000 })
  .map((n) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: __typename`).join(" ")} }`);
const graphqlRequest = fc.record({
  query: fc.oneof(
    fc
      .tuple(
        fc.constantFrom("query", "mutation", "subscription", "", "query Q($v: Int)"),
        fc.array(gqlSelection, { minLength: 1, maxLength: 4 }),
      )
      .map(([op, sels]) => `${op} { ${sels.join(" ")} }`),
    deepNesting,
    manyAliases,
    text,
  ),
  variables: fc.option(fc.oneof(fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue()), fc.jsonValue()), {
    nil: undefined,
  }),
  operationName: fc.option(text, { nil: undefined }),
  rawBody: fc.option(text, { nil: undefined }),
});

/** A Management API call with a generated body, on endpoints that take one. */
const mgmtRequest = fc.record({
  endpoint: fc.constantFrom(
    ["PATCH", "config/auth"],
    ["PATCH", "postgrest"],
    ["POST", "secrets"],
    ["DELETE", "secrets"],
    ["PATCH", "config/storage"],
    ["PATCH", "config/realtime"],
    ["PUT", "config/database/postgres"],
    ["PUT", "config/database/pooler"],
    ["POST", "network-restrictions/apply"],
    ["POST", "api-keys"],
    ["GET", "api-keys"],
  ),
  body: fc.oneof(
    fc.jsonValue(),
    fc.dictionary(
      fc.oneof(
        fc.constantFrom(
          "name",
          "value",
          "site_url",
          "jwt_exp",
          "max_rows",
          "db_schema",
          "fileSizeLimit",
          "max_connections",
          "dbAllowedCidrs",
          "type",
        ),
        fc.string({ maxLength: 8 }),
      ),
      fc.oneof(fc.jsonValue(), text),
    ),
    text,
  ),
  path: fc.option(fc.array(text, { maxLength: 3 }), { nil: undefined }),
});

async function errorBodyOf(res: Response): Promise<unknown> {
  const raw = await res.text();
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

describe("Hostile input", () => {
  let server: TestServer;
  let userJwt: string;

  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "10000000" });
    await server.sql(`
      create table articles (id serial primary key, title text, views int, tags text[], meta jsonb);
      create table posts (id serial primary key, article_id int references articles (id), body text);
      insert into articles (title, views, tags, meta) values ('a', 1, '{x}', '{"a": 1}'), ('b', 2, '{}', null);
      grant all on articles, posts to anon, authenticated;
      grant usage on all sequences in schema public to anon, authenticated;
      create function add_one(n int) returns int language sql as 'select n + 1';
      create table canary (id int primary key);
      insert into canary values (1);
      revoke all on canary from anon, authenticated;
    `);
    await waitForTable(server, "articles");
    userJwt = await userToken(server, "00000000-0000-4000-8000-000000000001");
  });
  afterAll(() => server.stop());

  afterEach(async () => {
    const { rows } = await server.sql("select count(*)::int as n from canary");
    expect(rows[0].n).toBe(1);
  });

  it("REST answers every generated request with 2xx or a PostgREST error, never 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(restRequest, async (r) => {
        const query = r.parts.map((p) =>
          r.encode ? p.split("=").map(encodeURIComponent).join("=") : urlSafe(p),
        );
        const url = `${server.url}/rest/v1/${urlSafe(r.table)}?${query.join("&")}`;
        const headers: Record<string, string> = { apikey: server.anonKey };
        if (r.signedIn) headers.authorization = `Bearer ${userJwt}`;
        if (r.prefer) headers.prefer = r.prefer;
        if (r.accept) headers.accept = r.accept;
        const withBody = r.method === "POST" || r.method === "PATCH";
        if (withBody) headers["content-type"] = "application/json";
        const res = await fetch(url, {
          method: r.method,
          headers,
          body: withBody ? (typeof r.body === "string" ? r.body : JSON.stringify(r.body ?? {})) : undefined,
        });
        const body = r.method === "HEAD" ? undefined : await errorBodyOf(res);
        expect({ status: res.status < 500 ? "ok" : res.status, body }).toMatchObject({ status: "ok" });
        if (res.status >= 400 && r.method !== "HEAD") {
          expect(body).toEqual(
            expect.objectContaining({ message: expect.any(String), code: expect.anything() }),
          );
        }
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 180_000);

  it("GraphQL answers every generated document with data or errors, never 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(graphqlRequest, async (r) => {
        const res = await fetch(`${server.url}/graphql/v1`, {
          method: "POST",
          headers: { apikey: server.anonKey, "content-type": "application/json" },
          body:
            r.rawBody ??
            JSON.stringify({ query: r.query, variables: r.variables, operationName: r.operationName }),
        });
        const body = await errorBodyOf(res);
        expect({ status: res.status < 500 ? "ok" : res.status, body }).toMatchObject({ status: "ok" });
        // pg_graphql answers 200 with data or errors; a body that is not a GraphQL request is refused before it
        // (as PostgREST does for the platform's /graphql/v1) with a 4xx and a message.
        const answer = body as { data?: unknown; errors?: unknown[]; message?: unknown };
        if (res.status === 200) expect("data" in answer || Array.isArray(answer.errors)).toBe(true);
        else
          expect({ status: res.status, message: typeof answer.message }).toEqual({
            status: expect.any(Number),
            message: "string",
          });
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 180_000);

  it("the Management API answers every generated body with 2xx or {message}, never 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(mgmtRequest, async (r) => {
        const [method, tail] = r.endpoint;
        const suffix = r.path ? "/" + r.path.map(urlSafe).join("/") : "";
        const res = await fetch(`${server.url}/v1/projects/${server.ref}/${tail}${suffix}`, {
          method,
          headers: { authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
          body: method === "GET" ? undefined : typeof r.body === "string" ? r.body : JSON.stringify(r.body),
        });
        const body = await errorBodyOf(res);
        expect({ status: res.status < 500 ? "ok" : res.status, body }).toMatchObject({ status: "ok" });
        if (res.status >= 400) expect(body).toEqual(expect.objectContaining({ message: expect.any(String) }));
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 180_000);
});
