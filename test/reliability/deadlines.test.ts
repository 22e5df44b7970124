import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import pino from "pino";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { TEST_AUTHENTICATOR_PASSWORD } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it answers something truthy. */
async function until<T>(probe: () => Promise<T | false | undefined>, ms = 60_000): Promise<T> {
  for (const end = Date.now() + ms; ;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    if (Date.now() > end) throw new Error("gave up waiting");
    await sleep(100);
  }
}

/** This file's deadlines: a connection is waited for 2 s, a statement's answer 3 s. */
const POOL_WAIT_MS = 2000;
const STATEMENT_MS = 3000;
/** What an answer may take at most here: both deadlines, and a generous margin for a loaded machine. */
const ANSWERED_WITHIN_MS = POOL_WAIT_MS + STATEMENT_MS + 10_000;

/**
 * Every data request has a deadline: a statement the database does not answer in time (a hung or stopped
 * server, or one running past the deadline) is cancelled on the server, its connection dropped, and the
 * request answered 503 in the API's own format. This file runs Strata with an embedded cluster of its own,
 * which it stops with SIGSTOP.
 */
describe("Deadlines of data requests", () => {
  let dir: string;
  let strata: RunningStrata;
  let base: string;
  let anonKey: string;
  let serviceKey: string;
  let publishableKey: string;
  let admin: pg.Pool;
  const stopped: number[] = [];

  const sql = (text: string, params?: unknown[]) => admin.query(text, params);
  const postmasterPid = () =>
    Number(readFileSync(path.join(dir, "pgdata", "postmaster.pid"), "utf8").split("\n")[0]);
  /** The postmaster and every process it started (backends, walwriter, ...). */
  const clusterProcesses = (): number[] => {
    const postmaster = postmasterPid();
    const children = readdirSync("/proc")
      .filter((name) => /^\d+$/.test(name))
      .filter((pid) => {
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
          return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === postmaster;
        } catch {
          return false;
        }
      })
      .map(Number);
    return [postmaster, ...children];
  };
  const resume = () => {
    for (const pid of stopped.splice(0)) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // gone
      }
    }
  };

  /** A request with its answer and how long it took; status 0 for no answer (a hang or a cut connection). */
  const timed = async (url: string, init: RequestInit = {}) => {
    const sent = Date.now();
    try {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null, ms: Date.now() - sent };
    } catch {
      return { status: 0, body: null, ms: Date.now() - sent };
    }
  };
  const rest = (p: string, key = anonKey, init: RequestInit = {}) =>
    timed(`${base}/rest/v1${p}`, {
      ...init,
      headers: { apikey: key, "content-type": "application/json", ...init.headers },
    });
  const rpc = (fn: string, args: unknown, key = anonKey) =>
    rest(`/rpc/${fn}`, key, { method: "POST", body: JSON.stringify(args) });
  const graphql = (query: string, key = anonKey) =>
    timed(`${base}/graphql/v1`, {
      method: "POST",
      headers: { apikey: key, "content-type": "application/json" },
      body: JSON.stringify({ query }),
    });
  const sleepingBackends = async () =>
    (
      await sql("select pid from pg_stat_activity where wait_event = 'PgSleep' and pid <> pg_backend_pid()")
    ).rows.map((r) => r.pid as number);

  beforeAll(async () => {
    dir = testTempDir("strata-deadlines-");
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(await freePort()),
        STRATA_DATA_DIR: dir,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        DATA_POOL_WAIT_MS: String(POOL_WAIT_MS),
        DATA_REQUEST_TIMEOUT_MS: String(STATEMENT_MS),
      }),
      pino({ level: "silent" }),
    );
    base = `http://127.0.0.1:${strata.port}`;
    anonKey = strata.info.anon_key;
    serviceKey = strata.info.service_role_key;
    admin = new pg.Pool({ connectionString: strata.ctx.adminUrl, max: 2 });
    admin.on("error", () => {});
    await sql(`create table public.items (id bigint primary key);
               insert into public.items values (1), (2);
               grant select, insert on public.items to anon;
               create function public.nap(seconds float8) returns int language plpgsql as
                 $$ begin perform pg_sleep(seconds); return 1; end $$;
               grant execute on function public.nap(float8) to anon, service_role`);
    await until(async () => (await rpc("nap", { seconds: 0 })).status === 200);
    // An opaque key: each request reads it on the control plane's pool.
    const created = await fetch(`${base}/v1/projects/${strata.info.ref}/api-keys`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${strata.info.management_token}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ type: "publishable", name: "web_app" }),
    });
    publishableKey = ((await created.json()) as { api_key: string }).api_key;
    await until(async () => (await graphql("{ itemsCollection { edges { node { id } } } }")).status === 200);
  }, 180_000);

  afterAll(async () => {
    resume();
    await admin?.end();
    await strata?.stop();
  });

  it("cancels a statement that runs past the deadline, drops its connection and answers 503", async () => {
    // service_role has no statement_timeout: only the client-side deadline bounds this statement.
    const answer = await rpc("nap", { seconds: 600 }, serviceKey);
    expect(answer.status).toBe(503);
    expect(answer.body).toEqual({
      code: "PGRST001",
      details: null,
      hint: null,
      message: "Database client error. Retrying the connection.",
    });
    expect(answer.ms).toBeGreaterThanOrEqual(STATEMENT_MS - 100);
    expect(answer.ms).toBeLessThan(ANSWERED_WITHIN_MS);
    // Seen from the database: the cancel stopped the sleep, and the backend of the dropped connection ended.
    await until(async () => (await sleepingBackends()).length === 0, 15_000);
    // The pool serves the next request on a connection of its own.
    expect((await rest("/items?select=id&order=id")).body).toEqual([{ id: 1 }, { id: 2 }]);
    expect((await rpc("nap", { seconds: 0 }, serviceKey)).status).toBe(200);
  }, 60_000);

  it("answers every request within its deadline while PostgreSQL is stopped (SIGSTOP), and serves again after SIGCONT", async () => {
    // Several pooled connections are idle and warm: the requests below find them and send their statements.
    const warm = await Promise.all(Array.from({ length: 6 }, () => rpc("nap", { seconds: 0.3 })));
    expect(warm.map((a) => a.status)).toEqual(Array(6).fill(200));
    expect((await rest("/items?select=id", publishableKey)).status).toBe(200);
    for (const pid of clusterProcesses()) {
      process.kill(pid, "SIGSTOP");
      stopped.push(pid);
    }
    try {
      const answers = await Promise.all([
        rest("/items?select=id"),
        rest("/items?select=id&id=eq.1"),
        rest("/items", anonKey, { method: "POST", body: JSON.stringify({ id: 3 }) }),
        rpc("nap", { seconds: 0 }),
        rpc("nap", { seconds: 0 }, serviceKey),
        graphql("{ itemsCollection { edges { node { id } } } }"),
        graphql('mutation { insertIntoitemsCollection(objects: [{ id: "4" }]) { affectedCount } }'),
        graphql("{ itemsCollection { edges { node { id } } } }", publishableKey),
      ]);
      // More requests than the pool has connections, arriving while the first ones wait; and requests whose
      // key is read on the control plane's pool.
      const later = await Promise.all([
        ...Array.from({ length: 12 }, () => rest("/items?select=id")),
        ...Array.from({ length: 8 }, () => rest("/items?select=id", publishableKey)),
      ]);
      for (const a of [...answers, ...later]) {
        expect(a.status).toBe(503);
        expect(a.ms).toBeLessThan(ANSWERED_WITHIN_MS);
      }
      // In each API's own format: PostgREST's for REST (the connection lost, or none free), pg_graphql's.
      for (const restAnswer of [...answers.slice(0, 5), ...later])
        expect(restAnswer.body).toEqual({
          code: expect.stringMatching(/^(PGRST001|53300)$/),
          details: null,
          hint: null,
          message: expect.any(String),
        });
      for (const graphqlAnswer of answers.slice(5))
        expect(graphqlAnswer.body).toEqual({ errors: [{ message: expect.any(String) }] });
      // Still stopped: the answers came from the deadlines, not from the database.
      expect(readFileSync(`/proc/${postmasterPid()}/stat`, "utf8")).toMatch(/\) T /);
    } finally {
      resume();
    }
    // Served again once PostgreSQL runs. (A write answered 503 may still commit once the server runs again,
    // as behind any timeout: it was sent before the server stopped answering.)
    await until(async () => (await rest("/items?select=id")).status === 200, 30_000);
    await until(async () => (await graphql("{ itemsCollection { edges { node { id } } } }")).status === 200);
    expect((await rest("/items", anonKey, { method: "POST", body: JSON.stringify({ id: 5 }) })).status).toBe(
      201,
    );
    expect((await sql("select id from public.items where id = 5")).rows).toEqual([{ id: "5" }]);
  }, 120_000);
});
