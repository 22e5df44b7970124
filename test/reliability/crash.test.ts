import { spawn, type ChildProcess } from "node:child_process";

import { createServer } from "node:net";
import path from "node:path";
import { adminQuery, createTestDatabase, dropTestDatabase } from "../helpers/db";
import {
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_JWT_SECRET,
  TEST_KEK,
  TEST_MANAGEMENT_TOKEN,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

const ROOT = path.resolve(__dirname, "../..");

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Cli {
  child: ChildProcess;
  url: string;
  ref: string;
  serviceKey: string;
}

/** `npm start` as a user runs it, against the test database, reading the keys from its banner. */
async function startCli(databaseUrl: string, dataDir: string): Promise<Cli> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      STRATA_DATA_DIR: dataDir,
      STRATA_KEK: TEST_KEK,
      JWT_SECRET: TEST_JWT_SECRET,
      MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
      LOG_LEVEL: "silent",
      GRAPHILE_ENV: "production",
    },
    stdio: ["ignore", "pipe", "ignore"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  for (let i = 0; i < 240 && !/service_role key: \S+/.test(out); i++)
    await new Promise((r) => setTimeout(r, 250));
  const ref = /Project ref: (\S+)/.exec(out)?.[1];
  const serviceKey = /service_role key: (\S+)/.exec(out)?.[1];
  if (!ref || !serviceKey) {
    child.kill("SIGKILL");
    throw new Error("the server did not print its banner");
  }
  return { child, url: `http://127.0.0.1:${port}`, ref, serviceKey };
}

/** Waits until a statement matching `pattern` is running in the database, then SIGKILLs the server. */
async function killWhileRunning(cli: Cli, databaseUrl: string, pattern: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const { rows } = await adminQuery(
      "select count(*)::int as n from pg_stat_activity where state = 'active' and query ilike $1 and pid <> pg_backend_pid()",
      [pattern],
      databaseUrl,
    );
    if (rows[0].n > 0) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const exited = new Promise((r) => cli.child.once("exit", r));
  cli.child.kill("SIGKILL");
  await exited;
}

/** Waits until no statement of the killed server is left running (its backends notice the closed socket). */
async function settled(databaseUrl: string, pattern: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const { rows } = await adminQuery(
      "select count(*)::int as n from pg_stat_activity where query ilike $1 and state <> 'idle' and pid <> pg_backend_pid()",
      [pattern],
      databaseUrl,
    );
    if (rows[0].n === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`statements matching ${pattern} still running`);
}

/** A SIGKILL of the server in the middle of a write leaves nothing of it: each write is one transaction. */
describe("A crash in the middle of a write", () => {
  let databaseUrl: string;
  const dataDir = testTempDir("strata-crash-");
  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    // Every row costs a little time, so each write below is still running when the server is killed.
    await adminQuery(
      `create table item (id int primary key, label text not null);
       create function slow_row() returns trigger language plpgsql as
         'begin perform pg_sleep(0.0005); return new; end';
       create trigger slow_row before insert or update on item for each row execute function slow_row();
       grant all on item to service_role;`,
      [],
      databaseUrl,
    );
  });
  afterAll(() => dropTestDatabase(databaseUrl));

  it("leaves no row of a REST bulk insert, of a GraphQL atMost update, or of a migration", async () => {
    let cli = await startCli(databaseUrl, dataDir);
    const headers = {
      apikey: cli.serviceKey,
      authorization: `Bearer ${cli.serviceKey}`,
      "content-type": "application/json",
    };
    const rows = Array.from({ length: 5000 }, (_, i) => ({ id: i + 1, label: "new" }));
    void fetch(`${cli.url}/rest/v1/item`, { method: "POST", headers, body: JSON.stringify(rows) }).catch(
      () => {},
    );
    await killWhileRunning(cli, databaseUrl, "%insert into%item%");
    await settled(databaseUrl, "%insert into%item%");
    // All or nothing (a COMMIT already on its way may still land): never part of the rows.
    const inserted = (await adminQuery("select count(*)::int as n from item", [], databaseUrl)).rows[0].n;
    expect([0, 5000]).toContain(inserted);
    await adminQuery("truncate item", [], databaseUrl);

    // Rows to update, written directly; then an update of all of them through GraphQL, killed half-way.
    await adminQuery(
      "alter table item disable trigger slow_row; insert into item select g, 'old' from generate_series(1, 5000) g; alter table item enable trigger slow_row",
      [],
      databaseUrl,
    );
    cli = await startCli(databaseUrl, dataDir);
    void fetch(`${cli.url}/graphql/v1`, {
      method: "POST",
      headers: { ...headers, apikey: cli.serviceKey, authorization: `Bearer ${cli.serviceKey}` },
      body: JSON.stringify({
        query:
          'mutation { updateItemCollection(set: { label: "changed" }, atMost: 100000) { affectedCount } }',
      }),
    }).catch(() => {});
    await killWhileRunning(cli, databaseUrl, "%update%item%");
    await settled(databaseUrl, "%update%item%");
    const labels = (
      await adminQuery("select label, count(*)::int as n from item group by 1", [], databaseUrl)
    ).rows;
    expect([[{ label: "old", n: 5000 }], [{ label: "changed", n: 5000 }]]).toContainEqual(labels);

    // A migration that creates a table, fills it, then is still working when the server dies.
    cli = await startCli(databaseUrl, dataDir);
    void fetch(`${cli.url}/v1/projects/${cli.ref}/database/migrations`, {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({
        name: "interrupted",
        query:
          "create table half_done (id int); insert into half_done select generate_series(1, 1000); select pg_sleep(3)",
      }),
    }).catch(() => {});
    await killWhileRunning(cli, databaseUrl, "%pg_sleep(3)%");
    await settled(databaseUrl, "%pg_sleep(3)%");
    const table = (
      await adminQuery(
        "select to_regclass('public.half_done') is not null as made, (select count(*)::int from pg_stat_activity) as n",
        [],
        databaseUrl,
      )
    ).rows[0].made as boolean;
    // The next start serves again; the migration is recorded exactly when its table exists, with all its rows.
    cli = await startCli(databaseUrl, dataDir);
    try {
      const list = await fetch(`${cli.url}/v1/projects/${cli.ref}/database/migrations`, {
        headers: { authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}` },
      });
      const recorded = ((await list.json()) as { name: string }[]).some((m) => m.name === "interrupted");
      expect(recorded).toBe(table);
      if (table)
        expect(
          (await adminQuery("select count(*)::int as n from half_done", [], databaseUrl)).rows[0].n,
        ).toBe(1000);
    } finally {
      const exited = new Promise((r) => cli.child.once("exit", r));
      cli.child.kill("SIGTERM");
      await exited;
    }
  }, 180_000);
});
