import { execFile } from "node:child_process";
import { promisify } from "node:util";
import net from "node:net";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { withDatabase } from "../../src/db/urls";
import { createLogger } from "../../src/log";
import { adminQuery } from "../helpers/db";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_MANAGEMENT_TOKEN,
  type TestServer,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { mgmt, waitForStatus } from "../management/client";

/**
 * The database listener (src/pooler): clients reach their project's database as `postgres.<ref>` (Supavisor's
 * naming), by the TLS server name `db.<ref>.<domain>` or by the database name `<ref>`; PostgreSQL checks the
 * project login's password itself. Effects are checked as the cluster's superuser on the project databases.
 */

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

interface Project {
  ref: string;
  password: string;
  database: string;
}

async function createProject(server: TestServer, name: string, password: string): Promise<Project> {
  const created = await mgmt(server, "POST", "/v1/projects", {
    body: { name, organization_slug: "default-org", db_pass: password, region: "us-east-1" },
  });
  expect(created.status).toBe(201);
  const ref: string = created.body.ref;
  await waitForStatus(server, ref, "ACTIVE_HEALTHY");
  const { rows } = await server.controlSql("select database_name from platform.projects where ref = $1", [
    ref,
  ]);
  return { ref, password, database: rows[0].database_name };
}

describe("the database listener", () => {
  let server: TestServer;
  let port: number;
  let a: Project;
  let b: Project;
  const asAdmin = (project: Project, sql: string) =>
    adminQuery(sql, [], withDatabase(server.dbUrl, project.database));

  /** Connects through the listener; answers the client (the caller ends it). */
  async function connect(config: pg.ClientConfig): Promise<pg.Client> {
    const client = new pg.Client({ host: "127.0.0.1", port, database: "postgres", ssl: false, ...config });
    client.on("error", () => {});
    await client.connect();
    return client;
  }

  /** The refusal a connection meets (its message), or "connected". */
  async function outcome(config: pg.ClientConfig): Promise<string> {
    try {
      const client = await connect(config);
      await client.end();
      return "connected";
    } catch (e) {
      return (e as Error).message;
    }
  }

  beforeAll(async () => {
    server = await startTestServer({ STRATA_DB_PORT: "0", MANAGEMENT_RATE_LIMIT: "100000" });
    port = (server.strata.ctx.dbListener as { port: number }).port;
    a = await createProject(server, "pooled-a", "password-of-a-1");
    b = await createProject(server, "pooled-b", "password-of-b-2");
  });
  afterAll(async () => {
    for (const p of [a, b]) if (p) await mgmt(server, "DELETE", `/v1/projects/${p.ref}`);
    await server.stop();
  }, 300_000);

  it("answers its address as the pooler's connection string", async () => {
    const res = await mgmt(server, "GET", `/v1/projects/${a.ref}/config/database/pooler`);
    expect(res.status).toBe(200);
    expect(res.body[0]).toMatchObject({
      database_type: "PRIMARY",
      db_user: `postgres.${a.ref}`,
      db_host: "127.0.0.1",
      db_port: port,
      db_name: "postgres",
      connection_string: `postgresql://postgres.${a.ref}:[YOUR-PASSWORD]@127.0.0.1:${port}/postgres`,
    });
  });

  it("lets postgres.<ref> with the project's password into that project's database only, as its owner", async () => {
    const client = await connect({ user: `postgres.${a.ref}`, password: a.password, database: "anything" });
    const { rows } = await client.query("select current_database() as db, current_user as role");
    expect(rows[0]).toEqual({ db: a.database, role: `postgres_${a.ref}` });
    await client.query(
      "create table public.through_listener (id int primary key); insert into public.through_listener values (7)",
    );
    // A session of the listener is an ordinary one: a query cancelled through it stops.
    const slow = client.query("select pg_sleep(60)");
    const cancelled = slow.then(
      () => "finished",
      (e: Error) => e.message,
    );
    await new Promise((r) => setTimeout(r, 300));
    const other = await connect({ user: `postgres.${a.ref}`, password: a.password });
    await other.query(
      "select pg_cancel_backend(pid) from pg_stat_activity where query = 'select pg_sleep(60)'",
    );
    await other.end();
    expect(await cancelled).toMatch(/cancel/);
    await client.end();

    expect((await asAdmin(a, "select id from public.through_listener")).rows).toEqual([{ id: 7 }]);
    expect((await asAdmin(b, "select to_regclass('public.through_listener') as t")).rows[0].t).toBeNull();
  });

  it("refuses a wrong password, another project's password, an unknown ref and foreign roles", async () => {
    expect(await outcome({ user: `postgres.${a.ref}`, password: b.password })).toMatch(
      /password authentication failed/,
    );
    expect(await outcome({ user: `postgres.${b.ref}`, password: a.password })).toMatch(
      /password authentication failed/,
    );
    expect(await outcome({ user: `postgres.${a.ref}`, password: "" })).not.toBe("connected");
    expect(await outcome({ user: "postgres.abcdefghijabcdefghij", password: a.password })).toMatch(
      /Tenant or user not found/,
    );
    // No project named: the listener cannot route it (no TLS name, no ref as database).
    expect(await outcome({ user: "postgres", password: a.password })).toMatch(/Tenant or user not found/);
    // Roles that are not the project's logins never reach PostgreSQL: Strata's own logins, another project's
    // owner, the cluster's superuser (unless it is named `postgres`, which stands for the project's owner).
    for (const role of [
      `strata_sql_${a.ref}`,
      `strata_read_${a.ref}`,
      `strata_auth_${a.ref}`,
      `postgres_${b.ref}`,
      "authenticator",
      "supabase_admin",
    ])
      expect(await outcome({ user: `${role}.${a.ref}`, password: a.password })).toMatch(
        /is not a login of project/,
      );
    const superuser = decodeURIComponent(new URL(server.dbUrl).username);
    const password = decodeURIComponent(new URL(server.dbUrl).password);
    if (superuser === "postgres") {
      const client = await connect({ user: `postgres.${a.ref}`, password: a.password });
      expect(
        (
          await client.query(
            "select current_user as role, usesuper from pg_user where usename = current_user",
          )
        ).rows[0],
      ).toEqual({ role: `postgres_${a.ref}`, usesuper: false });
      await client.end();
      expect(await outcome({ user: `postgres.${a.ref}`, password })).not.toBe("connected");
    } else
      expect(await outcome({ user: `${superuser}.${a.ref}`, password })).toMatch(/is not a login of project/);
    // A replication connection is not served.
    expect(
      await outcome({
        user: `postgres.${a.ref}`,
        password: a.password,
        replication: "database",
      } as pg.ClientConfig),
    ).toMatch(/Replication connections are not served/);
  });

  it("routes by the TLS server name db.<ref>.<domain> and by the database name <ref>", async () => {
    const byName = await connect({
      user: "postgres",
      password: b.password,
      ssl: { rejectUnauthorized: false, servername: `db.${b.ref}.localhost` },
    });
    const tls = await byName.query(
      "select current_database() as db, ssl from pg_stat_ssl where pid = pg_backend_pid()",
    );
    // The listener terminates TLS; its own connection to the cluster is on loopback.
    expect(tls.rows[0].db).toBe(b.database);
    await byName.end();

    const byDatabase = await connect({ user: "postgres", password: b.password, database: b.ref });
    expect((await byDatabase.query("select current_database() as db")).rows[0].db).toBe(b.database);
    await byDatabase.end();
    // The TLS name of one project with another project's password: refused.
    expect(
      await outcome({
        user: "postgres",
        password: a.password,
        ssl: { rejectUnauthorized: false, servername: `db.${b.ref}.localhost` },
      }),
    ).toMatch(/password authentication failed/);
  });

  it("serves psql, and the CLI's temporary login as cli_login_….<ref>", async () => {
    // psql runs beside the listener (this process): asynchronously.
    const psql = await promisify(execFile)(
      "psql",
      [
        "-XAtc",
        "select current_database()",
        `postgresql://postgres.${a.ref}@127.0.0.1:${port}/postgres?sslmode=require`,
      ],
      { env: { ...process.env, PGPASSWORD: a.password }, encoding: "utf8" },
    );
    expect(psql.stdout.trim()).toBe(a.database);

    const login = await mgmt(server, "POST", `/v1/projects/${a.ref}/cli/login-role`, {
      body: { read_only: true },
    });
    expect(login.status).toBe(201);
    const client = await connect({ user: `${login.body.role}.${a.ref}`, password: login.body.password });
    expect((await client.query("select id from public.through_listener")).rows).toEqual([{ id: 7 }]);
    await client.end();
    // Its name carries the ref: it is routed without the suffix too.
    const unsuffixed = await connect({ user: login.body.role, password: login.body.password });
    expect((await unsuffixed.query("select current_database() as db")).rows[0].db).toBe(a.database);
    await unsuffixed.end();
    // The same login named for the other project: refused before PostgreSQL.
    expect(await outcome({ user: `${login.body.role}.${b.ref}`, password: login.body.password })).toMatch(
      /is not a login of project/,
    );
  });

  it("lets the CLI's temporary login step down to postgres, which is the project's owner here", async () => {
    const login = async (readOnly: boolean) => {
      const made = await mgmt(server, "POST", `/v1/projects/${a.ref}/cli/login-role`, {
        body: { read_only: readOnly },
      });
      return connect({ user: made.body.role, password: made.body.password });
    };
    const whoAmI = async (client: pg.Client) =>
      (await client.query("select current_user as role")).rows[0].role as string;
    const writer = await login(false);
    // The CLI's statement, as a simple query and as a prepared statement (its migrations' batch), every time.
    await writer.query("SET SESSION ROLE postgres");
    expect(await whoAmI(writer)).toBe(`postgres_${a.ref}`);
    await writer.query("RESET ROLE");
    await writer.query({ name: "step_down", text: "SET SESSION ROLE postgres" });
    expect(await whoAmI(writer)).toBe(`postgres_${a.ref}`);
    await writer.query("create table public.stepped_down (id int)");
    // Any other statement passes as it is: `postgres` is the cluster's own role there, not the project's.
    await expect(writer.query("set session role postgres; select 1")).rejects.toThrow(
      /permission denied to set role "postgres"/,
    );
    await writer.end();
    expect(
      (await asAdmin(a, "select tableowner from pg_tables where tablename = 'stepped_down'")).rows,
    ).toEqual([{ tableowner: `postgres_${a.ref}` }]);
    // A read-only login may not become the owner either way.
    const reader = await login(true);
    await expect(reader.query("SET SESSION ROLE postgres")).rejects.toThrow(/permission denied/);
    await reader.end();
    // The owner's own login is not rewritten.
    const owner = await connect({ user: `postgres.${a.ref}`, password: a.password });
    await expect(owner.query("SET SESSION ROLE postgres")).rejects.toThrow(
      /permission denied to set role "postgres"/,
    );
    await owner.end();
  });

  it("refuses malformed first messages and a paused project's connections", async () => {
    const reply = (bytes: Buffer) =>
      new Promise<string>((resolve) => {
        const socket = net.connect(port, "127.0.0.1", () => socket.write(bytes));
        let got = "";
        socket.on("data", (d) => (got += d.toString("latin1")));
        socket.on("close", () => resolve(got));
        socket.on("error", () => resolve(got));
      });
    const badVersion = Buffer.alloc(8);
    badVersion.writeInt32BE(8, 0);
    badVersion.writeInt32BE(0x00020000, 4);
    expect(await reply(badVersion)).toMatch(/unsupported protocol version/);
    const tooLong = Buffer.alloc(8);
    tooLong.writeInt32BE(1 << 20, 0);
    expect(await reply(tooLong)).toBe("");

    expect((await mgmt(server, "POST", `/v1/projects/${b.ref}/pause`)).status).toBe(200);
    await waitForStatus(server, b.ref, "INACTIVE");
    expect(await outcome({ user: `postgres.${b.ref}`, password: b.password })).toMatch(/is not active/);
  });
});

/**
 * On Strata's embedded cluster failed logins ban the client's address. Through the listener PostgreSQL sees
 * the listener's loopback address: the listener counts a failure against the client's own address (127.0.0.2
 * and 127.0.0.3 stand for two other hosts) and refuses a banned one itself; its own address is never banned.
 */
describe("the database listener and network bans", () => {
  let strata: RunningStrata;
  let ref: string;
  const password = "banned-owner-password-1";
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${strata.port}${p}`, {
      method,
      headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  /** Connects through the listener from `from`; answers "connected" or the error. */
  async function fromAddress(from: string, pass: string): Promise<string> {
    const client = new pg.Client({
      host: "127.0.0.1",
      port: strata.ctx.dbListener!.port,
      user: `postgres.${ref}`,
      password: pass,
      database: "postgres",
      stream: () => {
        const socket = new net.Socket();
        const connect = socket.connect.bind(socket) as (o: net.TcpNetConnectOpts) => net.Socket;
        (socket as unknown as { connect: unknown }).connect = (port: number, host: string) =>
          connect({ port, host, localAddress: from });
        return socket;
      },
    });
    client.on("error", () => {});
    try {
      await client.connect();
      return "connected";
    } catch (e) {
      return (e as Error).message;
    } finally {
      await client.end().catch(() => {});
    }
  }

  beforeAll(async () => {
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(await freePort()),
        STRATA_DB_PORT: "0",
        STRATA_DATA_DIR: testTempDir("strata-listener-bans-"),
        MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        STRATA_KEK: "test-key-encryption-key-of-at-least-32-chars",
        MANAGEMENT_RATE_LIMIT: "100000",
      }),
      createLogger("silent"),
    );
    const created = await api("POST", "/v1/projects", {
      name: "banned",
      organization_slug: "default-org",
      db_pass: password,
    });
    ref = created.body.ref;
    for (
      let i = 0;
      i < 150 && (await api("GET", `/v1/projects/${ref}`)).body.status !== "ACTIVE_HEALTHY";
      i++
    )
      await new Promise((r) => setTimeout(r, 200));
  }, 180_000);
  afterAll(async () => {
    await strata?.stop();
  }, 120_000);

  it("bans the client's own address after 5 failed logins through it, not the listener's", async () => {
    for (let i = 0; i < 5; i++)
      expect(await fromAddress("127.0.0.2", "wrong-password")).toMatch(/password authentication failed/);
    let banned: string[] = [];
    for (let i = 0; i < 100 && !banned.includes("127.0.0.2"); i++) {
      await new Promise((r) => setTimeout(r, 100));
      banned = (await api("POST", `/v1/projects/${ref}/network-bans/retrieve`)).body.banned_ipv4_addresses;
    }
    expect(banned).toEqual(["127.0.0.2"]);
    expect(await fromAddress("127.0.0.2", password)).toMatch(/banned/);
    // Another client, and the listener's own loopback connections, are not.
    expect(await fromAddress("127.0.0.3", password)).toBe("connected");
    // Lifting the ban lets the address in again.
    expect(
      (await api("DELETE", `/v1/projects/${ref}/network-bans`, { ipv4_addresses: ["127.0.0.2"] })).status,
    ).toBe(200);
    expect(await fromAddress("127.0.0.2", password)).toBe("connected");
  });
});
