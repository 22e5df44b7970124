import pg from "pg";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

/** On the shared test cluster: per-database settings only (cluster-wide ones would reach other test files). */
describe("Management API: PostgreSQL config", () => {
  let server: TestServer;
  let path: string;
  /** The values before any PUT: the server's, which a dropped override goes back to. */
  const defaults: Record<string, string> = {};
  beforeAll(async () => {
    server = await startTestServer();
    path = `/v1/projects/${server.ref}/config/database/postgres`;
    for (const name of ["work_mem", "statement_timeout", "log_lock_waits"]) defaults[name] = await show(name);
  });
  afterAll(() => server.stop());

  async function show(name: string): Promise<string> {
    const fresh = new pg.Client({ connectionString: server.dbUrl });
    await fresh.connect();
    try {
      return (await fresh.query(`select current_setting($1) as v`, [name])).rows[0].v;
    } finally {
      await fresh.end();
    }
  }

  it("answers the effective values of every field the server has", async () => {
    const got = await mgmt(server, "GET", path);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      max_connections: expect.any(Number),
      shared_buffers: expect.stringMatching(/B$/),
      log_connections: expect.any(Boolean),
      session_replication_role: "origin",
      work_mem: await show("work_mem"),
    });
  });

  it("applies per-database settings to new sessions and reads them back", async () => {
    const put = await mgmt(server, "PUT", path, {
      body: {
        work_mem: "24MB",
        statement_timeout: "45s",
        max_parallel_workers_per_gather: 3,
        log_lock_waits: true,
      },
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      work_mem: "24MB",
      statement_timeout: "45s",
      max_parallel_workers_per_gather: 3,
      log_lock_waits: true,
    });
    expect(await show("work_mem")).toBe("24MB");
    expect(await show("statement_timeout")).toBe("45s");
    expect(await show("max_parallel_workers_per_gather")).toBe("3");
    expect(await show("log_lock_waits")).toBe("on");
    expect((await mgmt(server, "GET", path)).body.work_mem).toBe("24MB");
  });

  it("replaces the overrides: a field the body leaves out goes back to its default", async () => {
    // The platform's CLI deletes a key by sending back the config it read without that key.
    const { work_mem: _deleted, ...rest } = (await mgmt(server, "GET", path)).body;
    const put = await mgmt(server, "PUT", path, { body: rest });
    expect(put.status).toBe(200);
    expect(put.body.work_mem).toBe(defaults.work_mem);
    expect(await show("work_mem")).toBe(defaults.work_mem);
    expect(await show("statement_timeout")).toBe("45s");
    const { rows } = await server.sql(
      `select s.setconfig from pg_db_role_setting s join pg_database d on d.oid = s.setdatabase
        where d.datname = current_database() and s.setrole = 0`,
    );
    expect(rows[0].setconfig).toEqual(expect.arrayContaining(["statement_timeout=45s"]));
    expect(rows[0].setconfig.some((c: string) => c.startsWith("work_mem="))).toBe(false);
    // A body of one field keeps that one override only.
    expect((await mgmt(server, "PUT", path, { body: { work_mem: "24MB" } })).status).toBe(200);
    expect(await show("work_mem")).toBe("24MB");
    expect(await show("statement_timeout")).toBe(defaults.statement_timeout);
    expect(await show("log_lock_waits")).toBe(defaults.log_lock_waits);
  });

  it("refuses values outside PostgreSQL's own limits, and applies nothing of a refused body", async () => {
    const tooMany = await mgmt(server, "PUT", path, {
      body: {
        work_mem: "8MB",
        max_parallel_workers_per_gather: 5000,
      },
    });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.message).toMatch(/max_parallel_workers_per_gather must be between 0 and 1024/);
    expect(await show("work_mem")).toBe("24MB");
    const small = await mgmt(server, "PUT", path, { body: { work_mem: "10kB" } });
    expect(small.body.message).toMatch(/work_mem must be between 64 and/);
    expect((await mgmt(server, "PUT", path, { body: { work_mem: "4XB" } })).body.message).toMatch(
      /unit "XB"/,
    );
    expect(
      (await mgmt(server, "PUT", path, { body: { session_replication_role: "bogus" } })).body.message,
    ).toMatch(/one of origin, replica, local/);
    expect((await mgmt(server, "PUT", path, { body: { "cron.log_statement": "yes" } })).status).toBe(400);
    expect((await mgmt(server, "PUT", path, { body: { max_connections: "many" } })).status).toBe(400);
  });

  it("needs restart_database for start-time settings, and a cluster Strata runs to restart", async () => {
    const noRestart = await mgmt(server, "PUT", path, { body: { shared_buffers: "256MB" } });
    expect(noRestart.status).toBe(400);
    expect(noRestart.body.message).toMatch(/not run by Strata|restart_database/);
    const restart = await mgmt(server, "PUT", path, {
      body: { shared_buffers: "256MB", restart_database: true },
    });
    expect(restart.status).toBe(400);
    expect(restart.body.message).toMatch(/not run by Strata/);
  });

  it("applies statement_timeout to new sessions of the project database", async () => {
    const put = await mgmt(server, "PUT", path, { body: { statement_timeout: "1500ms" } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ statement_timeout: "1500ms" });
    // A session opened after the change starts with the new value (the helper's pool may hold older ones).
    const fresh = new pg.Client({ connectionString: server.dbUrl });
    await fresh.connect();
    try {
      const { rows } = await fresh.query("select current_setting('statement_timeout') as value");
      expect(rows[0].value).toBe("1500ms");
    } finally {
      await fresh.end();
    }
    expect((await mgmt(server, "PUT", path, { body: { shared_buffers: "1GB" } })).status).toBe(400);
  });
});
