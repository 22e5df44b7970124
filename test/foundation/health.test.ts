import { readFileSync, rmSync, statSync } from "node:fs";
import pg from "pg";
import { createServer } from "node:net";
import path from "node:path";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "../../src/db/embedded";
import { createLogger } from "../../src/log";
import { testTempDir } from "../helpers/tempDir";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

// This file runs its own PostgreSQL so it can stop it under a running server.
describe("/health while the database goes away and comes back", () => {
  let dir: string;
  let pgPort: number;
  let db: EmbeddedDatabase;
  let strata: RunningStrata;

  beforeAll(async () => {
    dir = testTempDir("strata-health-");
    pgPort = await freePort();
    db = await startEmbeddedPostgres(dir, pgPort);
    strata = await startStrata(
      loadConfig({
        DATABASE_URL: db.url,
        PORT: "0",
        STRATA_DATA_DIR: dir,
        AUTHENTICATOR_PASSWORD: "health-test-password",
      }),
      createLogger("silent"),
    );
  });
  afterAll(async () => {
    await strata?.stop();
    await db?.stop();
  });

  it("answers 503 while the database is down and 200 again once it is back, without a restart", async () => {
    const health = () => fetch(`http://127.0.0.1:${strata.port}/health`).then((r) => r.status);
    const answer = async () => {
      const res = await fetch(`http://127.0.0.1:${strata.port}/health`);
      return { status: res.status, body: await res.json() };
    };
    expect(await answer()).toEqual({ status: 200, body: { status: "ok", database: "reachable" } });
    await db.stop();
    // A cluster Strata does not run (DATABASE_URL) is probed: unreachable, with no reason Strata could know.
    expect(await answer()).toEqual({ status: 503, body: { status: "unavailable", database: "unreachable" } });
    db = await startEmbeddedPostgres(dir, pgPort);
    let status = 0;
    for (let i = 0; i < 20 && status !== 200; i++) {
      status = await health();
      if (status !== 200) await new Promise((r) => setTimeout(r, 250));
    }
    expect(status).toBe(200);
  });

  it("answers data requests 503 while the database is down and serves them again once it is back", async () => {
    const { anon_key: key } = strata.info;
    const url = `http://127.0.0.1:${strata.port}`;
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(
      "create table public.notes (id int primary key, body text); insert into public.notes values (1, 'kept');",
    );
    await admin.query("grant select on public.notes to anon");
    await admin.end();
    const rest = () => fetch(`${url}/rest/v1/notes?select=id,body`, { headers: { apikey: key } });
    const graphql = () =>
      fetch(`${url}/graphql/v1`, {
        method: "POST",
        headers: { apikey: key, "content-type": "application/json" },
        body: JSON.stringify({ query: "{ notesCollection { edges { node { body } } } }" }),
      });
    let ready = await rest();
    for (let i = 0; i < 40 && ready.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 250));
      ready = await rest();
    }
    expect(await ready.json()).toEqual([{ id: 1, body: "kept" }]);

    await db.stop();
    const down = await rest();
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({ code: "PGRST001" });
    expect((await graphql()).status).toBe(503);

    db = await startEmbeddedPostgres(dir, pgPort);
    const restarted = Date.now();
    let back = await rest();
    for (let i = 0; i < 400 && back.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 25));
      back = await rest();
    }
    // A figure for the reliability report, not an assertion.
    console.log(`REST served again ${Date.now() - restarted} ms after PostgreSQL accepted connections`);
    expect(await back.json()).toEqual([{ id: 1, body: "kept" }]);
    let answered: any;
    for (let i = 0; i < 40 && !answered?.data; i++) {
      answered = await (await graphql()).json();
      if (!answered?.data) await new Promise((r) => setTimeout(r, 250));
    }
    expect(answered).toEqual({ data: { notesCollection: { edges: [{ node: { body: "kept" } }] } } });
  });
});

describe("the embedded cluster's superuser password", () => {
  const connects = async (url: string) => {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => {});
    try {
      await client.connect();
      await client.end();
      return "ok";
    } catch (e) {
      return (e as { code?: string }).code ?? String(e);
    }
  };

  it("is generated for a new cluster, kept owner-only, and replaces the old fixed one of an existing cluster", async () => {
    const dir = testTempDir("strata-password-");
    const port = await freePort();
    const legacyUrl = `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;
    let db = await startEmbeddedPostgres(dir, port);
    try {
      const file = path.join(dir, "pg-superuser-password");
      const generated = readFileSync(file, "utf8").trim();
      expect(generated.length).toBeGreaterThanOrEqual(24);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(db.url).toContain(encodeURIComponent(generated));
      expect(await connects(db.url)).toBe("ok");
      expect(await connects(legacyUrl)).toBe("28P01");

      // A cluster from before generated passwords: the fixed password and no file.
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      await client.query("alter role postgres password 'postgres'");
      await client.query("create table kept(id int)");
      await client.end();
      rmSync(file);
      await db.stop();
      db = await startEmbeddedPostgres(dir, port);
      const replaced = readFileSync(file, "utf8").trim();
      expect(replaced).not.toBe(generated);
      expect(await connects(legacyUrl)).toBe("28P01");
      const after = new pg.Client({ connectionString: db.url });
      await after.connect();
      expect((await after.query("select to_regclass('kept') is not null as kept")).rows).toEqual([
        { kept: true },
      ]);
      await after.end();
    } finally {
      await db.stop();
    }
  });
});
