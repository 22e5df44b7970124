import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_JWT_SECRET,
  TEST_KEK,
  TEST_MANAGEMENT_TOKEN,
  type TestServer,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import {
  isSchemaChanged,
  queryInOneRoundTrip,
  withPipelinedTransaction,
  withTransaction,
  type TransactionScope,
} from "../../src/db/transaction";

/**
 * Read-your-writes of the schema across nodes: a change committed through one node (its SQL endpoint) is what
 * the next data request on another node sees, though that node's DDL-watch notice has not arrived. Node B's
 * watch is stopped, as if its notice were late; before the schema version (sql/project/820_schema_version.sql)
 * node B kept answering from its old schema caches.
 */

let a: TestServer;
let b: RunningStrata;
let bUrl: string;

beforeAll(async () => {
  a = await startTestServer();
  b = await startStrata(
    loadConfig({
      DATABASE_URL: a.dbUrl,
      PORT: "0",
      JWT_SECRET: TEST_JWT_SECRET,
      MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
      STRATA_KEK: TEST_KEK,
      STRATA_DATA_DIR: testTempDir("strata-node-b-"),
    }),
    createLogger(process.env.TEST_LOG_LEVEL ?? "error"),
  );
  bUrl = `http://127.0.0.1:${b.port}`;
  await sqlThroughA(`create table public.items (id int primary key, title text, secret text);
               insert into public.items values (1, 'one', 's1');
               revoke all on public.items from anon;
               grant select (id, title), insert (id, title) on public.items to anon`);
});

afterAll(async () => {
  await b?.stop();
  await a?.stop();
});

/** SQL through node A's Management API, as the project's owner. */
async function sqlThroughA(query: string): Promise<void> {
  const res = await fetch(`${a.url}/v1/projects/${a.ref}/database/query`, {
    method: "POST",
    headers: { authorization: `Bearer ${a.managementToken}`, "content-type": "application/json" },
    body: JSON.stringify({ query }),
  });
  expect(res.status).toBe(201);
}

async function graphqlOnB(query: string): Promise<any> {
  const res = await fetch(`${bUrl}/graphql/v1`, {
    method: "POST",
    headers: { apikey: a.anonKey, "content-type": "application/json" },
    body: JSON.stringify({ query }),
  });
  return res.json();
}

function restOnB(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${bUrl}/rest/v1/${path}`, {
    ...init,
    headers: { apikey: a.anonKey, "content-type": "application/json", ...init.headers },
  });
}

const SECRETS = "{ itemsCollection { edges { node { id secret } } } }";

test("a column grant or revoke through node A is what node B's next GraphQL and REST request sees", async () => {
  // Node B derives its caches from the schema as it is now, then hears of no change any more.
  expect((await graphqlOnB("{ itemsCollection { edges { node { title } } } }")).data).toEqual({
    itemsCollection: { edges: [{ node: { title: "one" } }] },
  });
  expect((await restOnB("items?select=title")).status).toBe(200);
  const runtime = (await b.ctx.registry.get(a.ref))!;
  runtime.stopWatching();
  expect((await graphqlOnB(SECRETS)).errors).toBeDefined();

  await sqlThroughA("grant select (secret) on public.items to anon");
  expect(await graphqlOnB(SECRETS)).toEqual({
    data: { itemsCollection: { edges: [{ node: { id: 1, secret: "s1" } }] } },
  });
  const rest = await restOnB("items?select=id,secret");
  expect(rest.status).toBe(200);
  expect(await rest.json()).toEqual([{ id: 1, secret: "s1" }]);

  // Writes: the request's transaction (GraphQL's, REST's for a singular answer) checks the version too.
  await sqlThroughA("grant insert (secret) on public.items to anon");
  const inserted = await graphqlOnB(
    'mutation { insertIntoitemsCollection(objects: [{id: 2, title: "two", secret: "s2"}]) { affectedCount } }',
  );
  expect(inserted).toEqual({ data: { insertIntoitemsCollection: { affectedCount: 1 } } });
  await sqlThroughA("revoke insert (secret) on public.items from anon");
  const singular = await restOnB("items", {
    method: "POST",
    headers: { accept: "application/vnd.pgrst.object+json", prefer: "return=representation" },
    body: JSON.stringify({ id: 3, title: "three", secret: "s3" }),
  });
  expect(singular.status).toBe(401);
  const { rows } = await a.sql("select id, secret from public.items order by id");
  expect(rows).toEqual([
    { id: 1, secret: "s1" },
    { id: 2, secret: "s2" },
  ]);

  // A table node B's REST schema cache has not seen: not answered "not found" from that cache, and in the
  // OpenAPI document (answered from the caches alone).
  const documented = async () => Object.keys((await (await restOnB("")).json()).paths);
  expect(await documented()).not.toContain("/fresh");
  await sqlThroughA("create table public.fresh (id int); grant select on public.fresh to anon");
  expect(await documented()).toContain("/fresh");
  expect((await restOnB("fresh")).status).toBe(200);

  await sqlThroughA("revoke select (secret) on public.items from anon");
  expect((await graphqlOnB(SECRETS)).errors).toBeDefined();
  expect((await restOnB("items?select=id,secret")).status).toBe(401);
});

test("a statement planned for an older schema version fails before it runs, in each way a data request sends one", async () => {
  const pool = (await a.strata.ctx.registry.get(a.ref))!.dataPool;
  const { rows } = await a.sql("select sum(changes)::text as version from extensions.strata_schema_changes");
  const current: string = rows[0].version;
  const older = String(BigInt(current) - 1n);
  const insert = (id: number) => ({
    text: "insert into public.items (id, title) values ($1, 'x')",
    values: [id],
  });
  const scope = (schemaVersion: string): TransactionScope => ({ role: "anon", claims: {}, schemaVersion });
  const ways = [
    (v: string, id: number) => queryInOneRoundTrip(pool, scope(v), insert(id)),
    (v: string, id: number) => withPipelinedTransaction(pool, scope(v), (tx) => tx.query(insert(id))),
    (v: string, id: number) =>
      withTransaction(pool, scope(v), (c) => c.query(insert(id).text, insert(id).values)),
  ];
  for (const [i, send] of ways.entries()) {
    const refused = await send(older, 10 + i).catch((e: unknown) => e);
    expect(isSchemaChanged(refused)).toBe(true);
    await send(current, 20 + i);
  }
  const { rows: written } = await a.sql("select id from public.items where id >= 10 order by id");
  expect(written.map((r: { id: number }) => r.id)).toEqual([20, 21, 22]);
});
