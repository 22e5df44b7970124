import { createServer } from "node:net";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "../../src/db/embedded";
import { createLogger } from "../../src/log";
import { startTestServer, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { migrate } from "../graphql/client";

/**
 * GraphQL answers 503 with a GraphQL error body, as REST answers 503, when the database is out of reach: its
 * connection terminated under a request, the cluster shutting down, restarting or stopped. A statement the
 * database refuses stays an ordinary GraphQL error (HTTP 200), and the next request after the database is
 * back is served.
 */

const UNAVAILABLE = {
  status: 503,
  body: { errors: [{ message: "Database client error. Retrying the connection." }] },
};

const SCHEMA = `
  create table note(id int primary key, body text not null check (length(body) < 10));
  create table secret(id int primary key, body text);
  alter table secret enable row level security;
  create policy none on secret using (false) with check (false);
  grant select, insert on note, secret to anon, service_role;
  create function nap(seconds float8) returns int language sql stable as 'select 1 from pg_sleep(seconds)';
  create function write_then_nap(seconds float8) returns int language sql volatile as
    $$ insert into note values (99, 'written'); select 1 from pg_sleep(seconds) $$;
  grant execute on function nap(float8), write_then_nap(float8) to anon, service_role;
  insert into note values (1, 'kept');`;

const READ = "{ noteCollection { edges { node { body } } } }";
const READ_ANSWER = {
  status: 200,
  body: { data: { noteCollection: { edges: [{ node: { body: "kept" } }] } } },
};

async function graphql(url: string, key: string, query: string) {
  const res = await fetch(`${url}/graphql/v1`, {
    method: "POST",
    headers: { apikey: key, authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ query }),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

/** Waits until a statement matching `pattern` runs in the database `sql` reaches. */
async function untilRunning(sql: (text: string) => Promise<pg.QueryResult>, pattern: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const { rows } = await sql(
      `select count(*)::int as n from pg_stat_activity
        where state = 'active' and query like '${pattern}' and pid <> pg_backend_pid()`,
    );
    if (rows[0].n > 0) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no statement like ${pattern} started`);
}

describe("GraphQL when its connection is terminated under a request", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await migrate(server, SCHEMA);
  });
  afterAll(() => server.stop());

  const ask = (query: string) => graphql(server.url, server.serviceKey, query);
  const terminateNaps = () =>
    server.sql(
      `select pg_terminate_backend(pid) from pg_stat_activity
        where datname = current_database() and query like '%nap%' and pid <> pg_backend_pid()`,
    );

  it("answers 503 for a query and for a mutation, writes nothing, and serves the next request", async () => {
    const query = ask("{ nap(seconds: 30) }");
    await untilRunning(server.sql, "%nap%");
    await terminateNaps();
    expect(await query).toEqual(UNAVAILABLE);

    const mutation = ask("mutation { write_then_nap(seconds: 30) }");
    await untilRunning(server.sql, "%nap%");
    await terminateNaps();
    expect(await mutation).toEqual(UNAVAILABLE);
    // Its insert was rolled back with the transaction.
    expect((await server.sql("select id from note order by id")).rows).toEqual([{ id: 1 }]);

    expect(await ask(READ)).toEqual(READ_ANSWER);
  });

  it("answers a statement the database refuses as a GraphQL error, with HTTP 200", async () => {
    const anon = (query: string) => graphql(server.url, server.anonKey, query);
    expect(
      await anon(
        `mutation { insertIntonoteCollection(objects: [{ id: 2, body: "far too long" }]) { affectedCount } }`,
      ),
    ).toEqual({
      status: 200,
      body: {
        data: null,
        errors: [{ message: expect.stringMatching(/violates check constraint "note_body_check"/) }],
      },
    });
    expect(
      await anon(
        `mutation { insertIntosecretCollection(objects: [{ id: 1, body: "x" }]) { affectedCount } }`,
      ),
    ).toEqual({
      status: 200,
      body: { data: null, errors: [{ message: expect.stringMatching(/row-level security/) }] },
    });
    expect((await server.sql("select count(*)::int as n from secret")).rows).toEqual([{ n: 0 }]);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

// A PostgreSQL of this file's own, to stop and restart under a running server.
describe("GraphQL while its PostgreSQL restarts or is stopped", () => {
  let dir: string;
  let pgPort: number;
  let db: EmbeddedDatabase;
  let strata: RunningStrata;
  let url: string;
  let key: string;

  const sql = async (text: string) => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      return await client.query(text);
    } finally {
      await client.end();
    }
  };
  const ask = (query: string) => graphql(url, key, query);
  /** Asks until the answer is `expected` (PostgreSQL coming back, the schema picking up DDL), then returns it. */
  async function askUntil(query: string, expected: unknown) {
    let answer = await ask(query);
    // Compared as JSON: fetch's objects come from another realm than the test's.
    for (let i = 0; i < 80 && JSON.stringify(answer) !== JSON.stringify(expected); i++) {
      await new Promise((r) => setTimeout(r, 250));
      answer = await ask(query);
    }
    return answer;
  }

  beforeAll(async () => {
    dir = testTempDir("strata-gql-down-");
    pgPort = await freePort();
    db = await startEmbeddedPostgres(dir, pgPort);
    strata = await startStrata(
      loadConfig({
        DATABASE_URL: db.url,
        PORT: "0",
        STRATA_DATA_DIR: dir,
        AUTHENTICATOR_PASSWORD: "graphql-down-test-password",
      }),
      createLogger("silent"),
    );
    url = `http://127.0.0.1:${strata.port}`;
    key = strata.info.service_role_key;
    await sql(SCHEMA);
    // The schema is built (and cached) while the database is up: what follows fails inside execution.
    expect(await askUntil(READ, READ_ANSWER)).toEqual(READ_ANSWER);
  });
  afterAll(async () => {
    await strata?.stop();
    await db?.stop();
  });

  it("answers a request the restart cuts off 503, then serves again", async () => {
    const query = ask("{ nap(seconds: 30) }");
    await untilRunning(sql, "%nap%");
    await db.restart();
    expect(await query).toEqual(UNAVAILABLE);
    expect(await askUntil(READ, READ_ANSWER)).toEqual(READ_ANSWER);
  });

  it("answers queries and mutations 503 while PostgreSQL is stopped, then serves them again", async () => {
    await db.stop();
    expect(await ask(READ)).toEqual(UNAVAILABLE);
    expect(
      await ask(`mutation { insertIntonoteCollection(objects: [{ id: 3, body: "new" }]) { affectedCount } }`),
    ).toEqual(UNAVAILABLE);
    db = await startEmbeddedPostgres(dir, pgPort);
    expect(await askUntil(READ, READ_ANSWER)).toEqual(READ_ANSWER);
    expect(
      await ask(`mutation { insertIntonoteCollection(objects: [{ id: 3, body: "new" }]) { affectedCount } }`),
    ).toEqual({ status: 200, body: { data: { insertIntonoteCollection: { affectedCount: 1 } } } });
  });
});
