import { readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../../src/app";
import { loadConfig } from "../../../src/config";
import { availableBinaries } from "../../../src/db/embeddedCluster";
import { withDatabase } from "../../../src/db/urls";
import { createLogger } from "../../../src/log";
import { atProjectHost } from "../client";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_MANAGEMENT_TOKEN,
  type TestServer,
} from "../../helpers/server";
import { testTempDir } from "../../helpers/tempDir";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function query(url: string, text: string, values: unknown[] = []): Promise<any[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

// A second cluster (PostgreSQL 18) and role changes: this file runs Strata with embedded clusters of its own.
describe("Management API: major-version upgrade to an embedded PostgreSQL 18", () => {
  let dir: string;
  let env: Record<string, string>;
  let strata: RunningStrata;
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${strata.port}${p}`, {
      method,
      headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const server = () => ({ url: `http://127.0.0.1:${strata.port}` }) as Parameters<typeof atProjectHost>[0];

  beforeAll(async () => {
    dir = testTempDir("strata-upgrade-");
    env = {
      PORT: "0",
      STRATA_PG_PORT: String(await freePort()),
      STRATA_PG_UPGRADE_PORT: String(await freePort()),
      STRATA_DATA_DIR: dir,
      MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
      STRATA_KEK: "test-key-encryption-key-of-at-least-32-chars",
    };
    strata = await startStrata(loadConfig(env), createLogger("silent"));
  }, 120_000);
  afterAll(async () => {
    await strata?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function waitUpgrade(ref: string, trackingId: string) {
    for (let i = 0; i < 600; i++) {
      const s = await call("GET", `/v1/projects/${ref}/upgrade/status?tracking_id=${trackingId}`);
      expect(s.status).toBe(200);
      if (s.body.databaseUpgradeStatus.status !== 0) {
        console.log(
          (await strata.ctx.platformPool.query("select error_detail from platform.project_upgrades")).rows,
        );
        return s.body.databaseUpgradeStatus;
      }
      await sleep(100);
    }
    throw new Error("the upgrade did not finish");
  }

  it("moves a project to PostgreSQL 18 keeping its rows, migrations, keys and owner password; the old database goes", async () => {
    const refused = await call("GET", `/v1/projects/${strata.info.ref}/upgrade/eligibility`);
    expect(refused.body).toMatchObject({ eligible: false, target_upgrade_versions: [] });
    expect(refused.body.current_app_version).toMatch(/^strata-postgres-17\./);
    expect(
      (await call("POST", `/v1/projects/${strata.info.ref}/upgrade`, { target_version: "18" })).status,
    ).toBe(400);

    const created = await call("POST", "/v1/projects", {
      name: "upgraded",
      organization_slug: "default-org",
      db_pass: "Owner-Pass-123",
    });
    expect(created.status).toBe(201);
    const ref: string = created.body.ref;
    for (let i = 0; i < 150; i++) {
      if ((await call("GET", `/v1/projects/${ref}`)).body.status === "ACTIVE_HEALTHY") break;
      await sleep(200);
    }
    const keys = (await call("GET", `/v1/projects/${ref}/api-keys`)).body as {
      name: string;
      api_key: string;
    }[];
    const anon = keys.find((k) => k.name === "anon")!.api_key;
    const sql = (q: string) => call("POST", `/v1/projects/${ref}/database/query`, { query: q });
    expect(
      (
        await sql(
          "create table public.items (id int primary key, v text); insert into public.items values (1, 'a'), (2, 'b')",
        )
      ).status,
    ).toBe(201);
    const migration = await call("POST", `/v1/projects/${ref}/database/migrations`, {
      name: "add_notes",
      query:
        "create table public.notes (id serial primary key, body text); insert into public.notes (body) values ('kept')",
    });
    expect(migration.status).toBe(200);
    const config = await call("PUT", `/v1/projects/${ref}/config/database/postgres`, {
      statement_timeout: "41s",
    });
    expect(config.status).toBe(200);
    const before = await atProjectHost(server(), ref, "/rest/v1/items?select=id,v&order=id", {
      apikey: anon,
    });
    expect(before.body).toEqual([
      { id: 1, v: "a" },
      { id: 2, v: "b" },
    ]);

    const eligible = await call("GET", `/v1/projects/${ref}/upgrade/eligibility`);
    expect(eligible.status).toBe(200);
    expect(eligible.body).toMatchObject({
      eligible: true,
      target_upgrade_versions: [{ sql_version: "18", release_channel: "ga" }],
    });
    expect((await call("POST", `/v1/projects/${ref}/upgrade`, { target_version: "19" })).status).toBe(400);
    expect((await call("GET", `/v1/projects/${ref}/upgrade/status`)).body).toEqual({
      databaseUpgradeStatus: null,
    });

    const { rows: projectRow } = await strata.ctx.platformPool.query(
      "select database_name from platform.projects where ref = $1",
      [ref],
    );
    const database: string = projectRow[0].database_name;
    const started = await call("POST", `/v1/projects/${ref}/upgrade`, { target_version: "18" });
    expect(started.status).toBe(201);
    const done = await waitUpgrade(ref, started.body.tracking_id);
    expect(done).toMatchObject({ status: 1, progress: "9_completed_upgrade", target_version: 18 });

    // The SQL endpoint runs on PostgreSQL 18, the rows and the migration came along, with their settings.
    const version = await sql("select version() as v");
    expect(version.body[0].v).toMatch(/^PostgreSQL 18\./);
    expect((await call("GET", `/v1/projects/${ref}/config/database/postgres`)).body).toMatchObject({
      statement_timeout: "41s",
    });
    const after = await atProjectHost(server(), ref, "/rest/v1/items?select=id,v&order=id", { apikey: anon });
    expect(after).toEqual({ status: 200, body: before.body });
    const notes = await atProjectHost(server(), ref, "/rest/v1/notes?select=body", { apikey: anon });
    expect(notes.body).toEqual([{ body: "kept" }]);
    const migrations = await call("GET", `/v1/projects/${ref}/database/migrations`);
    expect(migrations.body.map((m: { name: string }) => m.name)).toEqual(["add_notes"]);
    expect((await call("GET", `/v1/projects/${ref}`)).body.database.version).toMatch(/^18\./);

    // The owner logs in on the new cluster with the db_pass given at creation.
    const upgradeUrl = `postgres://postgres_${ref}:Owner-Pass-123@127.0.0.1:${env.STRATA_PG_UPGRADE_PORT}/${database}`;
    expect((await query(upgradeUrl, "select current_user as u"))[0].u).toBe(`postgres_${ref}`);
    // The old database and the project's roles there are gone.
    expect(
      await query(strata.ctx.adminUrl, "select 1 from pg_database where datname = $1", [database]),
    ).toEqual([]);
    expect(
      await query(strata.ctx.adminUrl, "select 1 from pg_roles where rolname = $1", [`postgres_${ref}`]),
    ).toEqual([]);

    // The new cluster starts with the server, like the main one.
    await strata.stop();
    strata = await startStrata(loadConfig(env), createLogger("silent"));
    const again = await atProjectHost(server(), ref, "/rest/v1/items?select=id,v&order=id", { apikey: anon });
    expect(again).toEqual({ status: 200, body: before.body });
    expect((await call("GET", `/v1/projects/${ref}/upgrade/eligibility`)).body).toMatchObject({
      eligible: false,
      current_app_version: expect.stringMatching(/^strata-postgres-18\./),
    });

    // Network restrictions act on the new cluster: its pg_hba.conf gets the project's rules.
    const restricted = await call("POST", `/v1/projects/${ref}/network-restrictions/apply`, {
      dbAllowedCidrs: ["10.0.0.0/8"],
    });
    expect(restricted.body).toMatchObject({ status: "applied" });
    const hba = readFileSync(path.join(env.STRATA_DATA_DIR, "pgdata-18", "pg_hba.conf"), "utf8");
    expect(hba).toContain(`host "${database}" all 10.0.0.0/8`);
    expect(hba).toContain(`host "${database}" all all reject`);
  }, 120_000);

  it("leaves a project whose upgrade fails on its cluster, usable, and marked failed", async () => {
    const created = await call("POST", "/v1/projects", {
      name: "stays",
      organization_slug: "default-org",
      db_pass: "Stays-Pass-123",
    });
    const ref: string = created.body.ref;
    for (let i = 0; i < 150; i++) {
      if ((await call("GET", `/v1/projects/${ref}`)).body.status === "ACTIVE_HEALTHY") break;
      await sleep(200);
    }
    const keys = (await call("GET", `/v1/projects/${ref}/api-keys`)).body as {
      name: string;
      api_key: string;
    }[];
    const anon = keys.find((k) => k.name === "anon")!.api_key;
    // An aggregate is not in Strata's logical dump: a view using it cannot be restored, so the move fails.
    await call("POST", `/v1/projects/${ref}/database/query`, {
      query: `create table public.items (id int primary key); insert into public.items values (7);
              create aggregate public.total(int) (sfunc = int4pl, stype = int);
              create view public.sums as select public.total(id) from public.items`,
    });
    const started = await call("POST", `/v1/projects/${ref}/upgrade`, { target_version: "18" });
    expect(started.status).toBe(201);
    const done = await waitUpgrade(ref, started.body.tracking_id);
    expect(done).toMatchObject({
      status: 2,
      error: "5_data_upgrade_completion_failed",
      error_message: expect.stringMatching(/public\.total/),
    });
    const project = (await call("GET", `/v1/projects/${ref}`)).body;
    expect(project).toMatchObject({ status: "ACTIVE_HEALTHY" });
    expect(project.database.version).toMatch(/^17\./);
    const rows = await atProjectHost(server(), ref, "/rest/v1/items?select=id", { apikey: anon });
    expect(rows).toEqual({ status: 200, body: [{ id: 7 }] });
    // Nothing of it is left on the new cluster.
    const { rows: cluster } = await strata.ctx.platformPool.query(
      "select database_name from platform.projects where ref = $1",
      [ref],
    );
    const target = (await strata.ctx.embeddedClusters!.ensure(availableBinaries()[0])).adminUrl;
    expect(
      await query(target, "select 1 from pg_database where datname = $1", [cluster[0].database_name]),
    ).toEqual([]);
    expect(
      await query(withDatabase(target, "postgres"), "select 1 from pg_roles where rolname = $1", [
        `postgres_${ref}`,
      ]),
    ).toEqual([]);
  }, 60_000);

  it("marks an upgrade a stop cut short failed at the next start, and opens its project's database again", async () => {
    const created = async (name: string) => {
      const { ref } = (
        await call("POST", "/v1/projects", {
          name,
          organization_slug: "default-org",
          db_pass: "Cut-Pass-123",
        })
      ).body as { ref: string };
      for (let i = 0; i < 150; i++) {
        if ((await call("GET", `/v1/projects/${ref}`)).body.status === "ACTIVE_HEALTHY") break;
        await sleep(200);
      }
      const { rows } = await strata.ctx.platformPool.query(
        "select database_name, cluster_id from platform.projects where ref = $1",
        [ref],
      );
      return { ref, database: rows[0].database_name as string, cluster: rows[0].cluster_id as string };
    };
    const cut = await created("cut short");
    await call("POST", `/v1/projects/${cut.ref}/database/query`, {
      query: "create table public.kept (id int primary key); insert into public.kept values (1)",
    });
    // A project the upgrade had already moved: it is where it belongs, and stays as it is.
    const moved = await created("moved on");
    const { rows } = await strata.ctx.platformPool.query(
      `insert into platform.project_upgrades (project_ref, source_cluster_id, target_version)
       values ($1, $2, 18), ($3, 'an-earlier-cluster', 18) returning id`,
      [cut.ref, cut.cluster, moved.ref],
    );
    // One upgrade of a project at a time.
    const again = await call("POST", `/v1/projects/${moved.ref}/upgrade`, { target_version: "18" });
    expect(again).toEqual({
      status: 409,
      body: { message: `An upgrade of project ${moved.ref} is already running` },
    });
    // As the upgrade leaves them mid-move: the project UPGRADING, its database closed to every session.
    await strata.ctx.platformPool.query("update platform.projects set status = 'UPGRADING' where ref = $1", [
      cut.ref,
    ]);
    for (const { database } of [cut, moved])
      await query(strata.ctx.adminUrl, `alter database "${database}" with allow_connections false`);

    await strata.stop();
    strata = await startStrata(loadConfig(env), createLogger("silent"));

    const status = await call("GET", `/v1/projects/${cut.ref}/upgrade/status?tracking_id=${rows[0].id}`);
    expect(status.body.databaseUpgradeStatus).toMatchObject({
      status: 2,
      error: "8_upgrade_completion_failed",
      error_message: "Strata stopped during the upgrade",
    });
    expect((await call("GET", `/v1/projects/${cut.ref}`)).body.status).toBe("ACTIVE_HEALTHY");
    const allowed = (database: string) =>
      query(strata.ctx.adminUrl, "select datallowconn from pg_database where datname = $1", [database]);
    expect(await allowed(cut.database)).toEqual([{ datallowconn: true }]);
    const anon = ((await call("GET", `/v1/projects/${cut.ref}/api-keys`)).body as any[]).find(
      (k) => k.name === "anon",
    ).api_key;
    expect(await atProjectHost(server(), cut.ref, "/rest/v1/kept?select=id", { apikey: anon })).toEqual({
      status: 200,
      body: [{ id: 1 }],
    });

    const { rows: movedUpgrade } = await strata.ctx.platformPool.query(
      "select status, error_detail from platform.project_upgrades where id = $1",
      [rows[1].id],
    );
    expect(movedUpgrade).toEqual([{ status: 2, error_detail: "Strata stopped during the upgrade" }]);
    expect(await allowed(moved.database)).toEqual([{ datallowconn: false }]);
    await query(strata.ctx.adminUrl, `alter database "${moved.database}" with allow_connections true`);
  }, 120_000);
});

describe("Management API: upgrade on a DATABASE_URL cluster", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("is not eligible and refuses with 400", async () => {
    const res = await fetch(`${server.url}/v1/projects/${server.ref}/upgrade`, {
      method: "POST",
      headers: { Authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
      body: JSON.stringify({ target_version: "18" }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/DATABASE_URL/);
    const elig = await fetch(`${server.url}/v1/projects/${server.ref}/upgrade/eligibility`, {
      headers: { Authorization: `Bearer ${server.managementToken}` },
    });
    expect(await elig.json()).toMatchObject({ eligible: false, target_upgrade_versions: [] });
    const missing = await fetch(`${server.url}/v1/projects/${server.ref}/upgrade`, {
      method: "POST",
      headers: { Authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
      body: JSON.stringify({}),
    });
    expect(missing.status).toBe(400);
  });

  it("describes the upgrade and disk autoscale bodies in the OpenAPI document", async () => {
    const doc: any = await (await fetch(`${server.url}/v1/openapi.json`)).json();
    const op = (p: string, m: string) => doc.paths[`/v1/projects/{ref}${p}`][m];
    const schemaOf = (o: any, status: string) => o.responses[status].content["application/json"].schema;
    expect(op("/upgrade", "post").requestBody.content["application/json"].schema.required).toEqual([
      "target_version",
    ]);
    expect(schemaOf(op("/upgrade", "post"), "201").properties).toHaveProperty("tracking_id");
    expect(schemaOf(op("/upgrade/eligibility", "get"), "200").properties).toHaveProperty(
      "target_upgrade_versions",
    );
    expect(
      schemaOf(op("/upgrade/status", "get"), "200").properties.databaseUpgradeStatus.anyOf[0].properties,
    ).toHaveProperty("progress");
    expect(op("/upgrade/status", "get").parameters.map((p: any) => p.name)).toContain("tracking_id");
    expect(
      op("/config/disk/autoscale", "put").requestBody.content["application/json"].schema.properties,
    ).toHaveProperty("max_size_gb");
    expect(schemaOf(op("/config/disk/autoscale", "get"), "200").properties).toHaveProperty("growth_percent");
  });
});
