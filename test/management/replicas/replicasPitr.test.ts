import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../../src/app";
import { loadConfig } from "../../../src/config";
import { createLogger } from "../../../src/log";
import { startTestServer, TEST_AUTHENTICATOR_PASSWORD, type TestServer } from "../../helpers/server";
import { testTempDir } from "../../helpers/tempDir";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it answers something truthy (or gives up after `ms`). */
async function until<T>(probe: () => Promise<T>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    if (Date.now() > end) throw new Error("gave up waiting");
    await sleep(200);
  }
}

// Replicas and WAL archiving act on the cluster itself: this file runs Strata with an embedded cluster of its own.
describe("Read replicas and point-in-time restore on the embedded cluster", () => {
  let dir: string;
  let strata: RunningStrata;
  let base: string;
  let mgmt: (method: string, p: string, body?: unknown) => Promise<{ status: number; body: any }>;
  let sql: (text: string, params?: unknown[]) => Promise<pg.QueryResult>;
  let primary: pg.Pool;

  beforeAll(async () => {
    dir = testTempDir("strata-replicas-");
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(await freePort()),
        STRATA_DATA_DIR: dir,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        MANAGEMENT_TOKEN: "sbp_" + "0123456789abcdef".repeat(2) + "01234567",
        // No scheduled backups during the test: it takes the ones it needs.
        BACKUP_SCHEDULE_CHECK_MS: "3600000",
      }),
      createLogger((process.env.TEST_LOG_LEVEL as "warn") ?? "silent"),
    );
    base = `http://127.0.0.1:${strata.port}`;
    mgmt = async (method, p, body) => {
      const res = await fetch(`${base}/v1/projects/${strata.info.ref}${p}`, {
        method,
        headers: {
          Authorization: `Bearer ${strata.info.management_token}`,
          "content-type": "application/json",
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };
    primary = new pg.Pool({ connectionString: strata.ctx.adminUrl, max: 2 });
    primary.on("error", () => {});
    sql = (text, params) => primary.query(text, params);
  }, 120_000);
  afterAll(async () => {
    await primary?.end();
    await strata?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const rest = (p: string, init: RequestInit = {}) =>
    fetch(`${base}/rest/v1${p}`, {
      ...init,
      headers: { apikey: strata.info.anon_key, "content-type": "application/json", ...init.headers },
    });

  it("sets up a streaming replica that psql and REST reads reach, and removes it", async () => {
    await sql("create table public.items (id int primary key, note text)");
    await sql("grant select, insert on public.items to anon");
    await sql(
      "create function public.in_recovery() returns boolean language sql stable as 'select pg_is_in_recovery()'",
    );
    await sql("grant execute on function public.in_recovery() to anon");
    await sql("insert into public.items values (1, 'before the replica')");

    expect((await mgmt("POST", "/read-replicas/setup", { read_replica_region: "nowhere" })).status).toBe(400);
    expect((await mgmt("POST", "/read-replicas/setup", { read_replica_region: "local" })).status).toBe(204);
    const replica = await until(async () => {
      const list = (await mgmt("GET", "/read-replicas")).body;
      return list[0].status === "COMING_UP" ? undefined : list[0];
    });
    expect(replica).toMatchObject({ status: "ACTIVE_HEALTHY", error: null });
    expect(replica.identifier).toMatch(new RegExp(`^${strata.info.ref}-rr-local-`));

    // A row written on the primary is read on the replica's own port (a second channel: SQL).
    await sql("insert into public.items values (2, 'after the replica')");
    const standbyUrl = new URL(strata.ctx.adminUrl);
    standbyUrl.port = String(replica.db_port);
    const standby = new pg.Client({ connectionString: standbyUrl.toString() });
    await standby.connect();
    try {
      expect((await standby.query("select pg_is_in_recovery() as r")).rows[0].r).toBe(true);
      await until(
        async () => (await standby.query("select 1 from public.items where id = 2")).rowCount === 1,
      );
      await expect(standby.query("insert into public.items values (3, 'no')")).rejects.toThrow(/read-only/);
    } finally {
      await standby.end();
    }

    // REST reads go to the replica (the function answers from a server in recovery); writes to the primary.
    // (Each node learns of the replica from the control plane's change notice.)
    await until(async () => (await (await rest("/rpc/in_recovery")).json()) === true, 10_000);
    const rows = await until(async () => {
      const body = await (await rest("/items?select=id,note&order=id")).json();
      return body.length === 2 ? body : undefined;
    });
    expect(rows[1]).toEqual({ id: 2, note: "after the replica" });
    const write = await rest("/items", { method: "POST", body: JSON.stringify({ id: 4, note: "primary" }) });
    expect(write.status).toBe(201);
    expect((await sql("select note from public.items where id = 4")).rows[0].note).toBe("primary");
    const pooler = (await mgmt("GET", "/config/database/pooler")).body;
    expect(pooler[1]).toMatchObject({
      identifier: replica.identifier,
      database_type: "READ_REPLICA",
      db_port: replica.db_port,
    });
    const lag = (await mgmt("GET", "/read-replicas")).body[0];
    expect(typeof lag.lag_bytes).toBe("number");

    // The replica takes the primary's access rules as they change.
    const restricted = await mgmt("POST", "/network-restrictions/apply", { dbAllowedCidrs: ["10.0.0.0/8"] });
    expect(restricted.status).toBe(201);
    const [replicaDir] = readdirSync(path.join(dir, "replicas"));
    const hba = path.join(dir, "replicas", replicaDir, "pgdata", "pg_hba.conf");
    expect(readFileSync(hba, "utf8")).toMatch(/10\.0\.0\.0\/8/);
    const reopened = await mgmt("POST", "/network-restrictions/apply", {
      dbAllowedCidrs: ["0.0.0.0/0"],
      dbAllowedCidrsV6: ["::/0"],
    });
    expect(reopened.status).toBe(201);

    expect((await mgmt("POST", "/read-replicas/remove", { database_identifier: "nope" })).status).toBe(404);
    expect(
      (await mgmt("POST", "/read-replicas/remove", { database_identifier: replica.identifier })).status,
    ).toBe(204);
    expect(readdirSync(path.join(dir, "replicas"))).toEqual([]);
    expect(
      (await sql("select count(*)::int as n from pg_replication_slots where slot_type = 'physical'")).rows[0]
        .n,
    ).toBe(0);
    expect(
      (await sql("select count(*)::int as n from pg_roles where rolname like 'strata\\_replica\\_%'")).rows[0]
        .n,
    ).toBe(0);
    expect((await mgmt("GET", "/read-replicas")).body).toEqual([]);
    await until(async () => (await (await rest("/rpc/in_recovery")).json()) === false, 10_000);
  }, 120_000);

  it("archives WAL and restores to the second by replaying it from a base backup", async () => {
    const started = await mgmt("POST", "/database/backups", { is_physical_backup: true });
    expect(started.status).toBe(201);
    expect(started.body.is_physical_backup).toBe(true);
    const listed = await until(async () => {
      const body = (await mgmt("GET", "/database/backups")).body;
      const b = body.backups.find((x: any) => x.id === started.body.id);
      return b.status === "RUNNING" ? undefined : body;
    });
    expect(listed.backups.find((x: any) => x.id === started.body.id)).toMatchObject({ status: "COMPLETED" });
    expect(listed).toMatchObject({ archiver_enabled: true, pitr_enabled: true });
    expect(listed.physical_backup_data.earliest_physical_backup_date_unix).toEqual(expect.any(Number));
    // The base backup holds the whole cluster's files, backup_label from pg_backup_stop included.
    expect(existsSync(path.join(dir, "base-backups", String(started.body.id), "backup_label"))).toBe(true);

    // Retention: archived WAL older than the oldest kept base backup's start is removed.
    const control = new pg.Client({ connectionString: strata.ctx.controlUrl });
    await control.connect();
    const { rows: bases } = await control
      .query("select start_wal_file from platform.physical_backups where id = $1", [started.body.id])
      .finally(() => control.end());
    const segments = () => readdirSync(path.join(dir, "wal-archive")).filter((f) => /^[0-9A-F]{24}$/.test(f));
    expect(segments().length).toBeGreaterThan(0);
    expect(segments().every((f) => f.slice(8) >= bases[0].start_wal_file.slice(8))).toBe(true);

    await sql("create table public.pitr (v text)");
    await sql("insert into public.pitr values ('A')");
    await sleep(1100);
    const target = Math.floor(Date.now() / 1000);
    await sleep(1100);
    await sql("insert into public.pitr values ('B')");
    await sql("drop table public.pitr");

    const restore = await mgmt("POST", "/database/backups/restore-pitr", {
      recovery_time_target_unix: target,
    });
    expect(restore.status).toBe(201);
    const done = await until(async () => {
      const list = (await mgmt("GET", "/database/backups/restores")).body;
      const last = list[list.length - 1];
      return last.status === "RUNNING" ? undefined : last;
    }, 120_000);
    expect(done).toMatchObject({
      status: "COMPLETED",
      method: "wal_replay",
      physical_backup_id: started.body.id,
    });
    // Second channel: the table is back as it was at the target second, with A and without B.
    expect((await sql("select v from public.pitr order by v")).rows).toEqual([{ v: "A" }]);
    expect(readdirSync(path.join(dir, "restore-clusters"))).toEqual([]);

    // A gap in the archive: the restore falls back to the latest logical backup before the target (here the
    // pre_restore backup of the state the first restore replaced, without the table).
    rmSync(path.join(dir, "wal-archive", bases[0].start_wal_file));
    await sleep(1100);
    const again = await mgmt("POST", "/database/backups/restore-pitr", {
      recovery_time_target_unix: Math.floor(Date.now() / 1000),
    });
    expect(again.status).toBe(201);
    const fallback = await until(async () => {
      const list = (await mgmt("GET", "/database/backups/restores")).body;
      return list.length === 2 && list[1].status !== "RUNNING" ? list[1] : undefined;
    }, 120_000);
    expect(fallback).toMatchObject({
      status: "COMPLETED",
      method: "logical_backup",
      physical_backup_id: null,
    });
    expect((await sql("select to_regclass('public.pitr') as t")).rows[0].t).toBeNull();
  }, 180_000);
});

describe("Read replicas and WAL archiving on a DATABASE_URL cluster", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("answers that replicas and physical backups need the embedded cluster", async () => {
    const call = (method: string, p: string, body?: unknown) =>
      fetch(`${server.url}/v1/projects/${server.ref}${p}`, {
        method,
        headers: { Authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const setup = await call("POST", "/read-replicas/setup", { read_replica_region: "local" });
    expect(setup.status).toBe(400);
    expect((await setup.json()).message).toMatch(/embedded cluster/);
    const physical = await call("POST", "/database/backups", { is_physical_backup: true });
    expect(physical.status).toBe(400);
    const list = await (await call("GET", "/database/backups")).json();
    expect(list).toMatchObject({ archiver_enabled: false, pitr_enabled: false });
  });
});
