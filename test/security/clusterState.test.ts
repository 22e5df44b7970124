import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { SignJWT } from "jose";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { newAccessToken, sha256 } from "../../src/platform/ids";
import { TEST_AUTHENTICATOR_PASSWORD } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Polls `probe` until it answers something truthy. */
async function until<T>(probe: () => Promise<T>, ms = 60_000): Promise<T> {
  for (const end = Date.now() + ms; ;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    if (Date.now() > end) throw new Error("gave up waiting");
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Cluster-wide state (ALTER SYSTEM, restarts, physical backups, replicas) belongs to the installation: a tenant
 * of a free or of an enterprise organization is refused, whatever its organization role; the installation
 * administrator is not. This file runs Strata with an embedded cluster of its own, where all of these work.
 */
describe("Cluster-wide state belongs to the installation's administrators", () => {
  let dir: string;
  let strata: RunningStrata;
  let base: string;
  let admin: pg.Pool;
  /** Superuser SQL on the cluster (the main database: the default project's). */
  let sql: (text: string, params?: unknown[]) => Promise<pg.QueryResult>;
  let adminToken: string;
  /** Owner of a free organization (made by itself) and its project. */
  let freeToken: string;
  let freeRef: string;
  /** Owner (not the installation's admin) of the installation's enterprise organization, and its default project. */
  let entToken: string;
  let entRef: string;

  const call = async (token: string, method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const control = (text: string, params?: unknown[]) => strata.ctx.platformPool.query(text, params);

  /** A personal token of a new user, an Owner of the organization `slug` (when given). */
  async function newUser(name: string, slug?: string, permissions?: string[]): Promise<string> {
    const { rows } = await control(
      "insert into platform.users (email, username) values ($1, $2) returning id, is_installation_admin",
      [`${name}@example.test`, name],
    );
    expect(rows[0].is_installation_admin).toBe(false);
    if (slug)
      await control(
        `insert into platform.organization_members (organization_id, user_id, role_name)
         select id, $2, 'Owner' from platform.organizations where slug = $1`,
        [slug, rows[0].id],
      );
    return tokenOf(rows[0].id, { permissions });
  }

  async function tokenOf(
    userId: string,
    opts: { permissions?: string[]; scopes?: string[]; appId?: string; orgId?: string } = {},
  ): Promise<string> {
    const token = newAccessToken();
    await control(
      `insert into platform.access_tokens (user_id, name, token_hash, token_prefix, permissions, scopes, oauth_app_id, organization_id)
       values ($1, 'test', $2, $3, $4, $5, $6, $7)`,
      [
        userId,
        sha256(token),
        token.slice(0, 8),
        opts.permissions ?? null,
        opts.scopes ?? null,
        opts.appId ?? null,
        opts.orgId ?? null,
      ],
    );
    return token;
  }

  /** What ALTER SYSTEM and a restart would change: the auto.conf file, its entries, the settings, the postmaster. */
  async function clusterState() {
    const { rows: file } = await sql(
      "select name, setting from pg_file_settings where sourcefile like '%postgresql.auto.conf' order by seqno",
    );
    const { rows: settings } = await sql("select name, setting from pg_settings order by name");
    const { rows: started } = await sql("select pg_postmaster_start_time()::text as t");
    return {
      autoConf: readFileSync(path.join(dir, "pgdata", "postgresql.auto.conf"), "utf8"),
      file,
      settings,
      started: started[0].t,
    };
  }

  const databaseOf = async (ref: string): Promise<string> =>
    (await control("select database_name from platform.projects where ref = $1", [ref])).rows[0]
      .database_name;

  /** Settings stored for a database itself (ALTER DATABASE ... SET). */
  async function databaseSettings(database: string): Promise<string[]> {
    const { rows } = await sql(
      `select coalesce(s.setconfig, '{}') as c from pg_database d
         left join pg_db_role_setting s on s.setdatabase = d.oid and s.setrole = 0 where d.datname = $1`,
      [database],
    );
    return rows[0].c;
  }

  /** `current_setting(name)` in a new session of `database` (as the superuser). */
  async function show(database: string, name: string): Promise<string> {
    const url = new URL(strata.ctx.adminUrl);
    url.pathname = `/${database}`;
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      return (await client.query("select current_setting($1) as v", [name])).rows[0].v;
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    dir = testTempDir("strata-clusterstate-");
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(await freePort()),
        STRATA_DATA_DIR: dir,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        MANAGEMENT_TOKEN: "sbp_" + "0123456789abcdef".repeat(2) + "01234567",
        MANAGEMENT_RATE_LIMIT: "10000",
        // No scheduled base backup: the test shows that none is taken unless the admin asks.
        BACKUP_SCHEDULE_CHECK_MS: "3600000",
      }),
      createLogger((process.env.TEST_LOG_LEVEL as "warn") ?? "silent"),
    );
    base = `http://127.0.0.1:${strata.port}`;
    admin = new pg.Pool({ connectionString: strata.ctx.adminUrl, max: 2 });
    admin.on("error", () => {});
    sql = (text, params) => admin.query(text, params);
    adminToken = strata.info.management_token!;
    entRef = strata.info.ref;
    entToken = await newUser("enterprise-owner", "default-org");
    freeToken = await newUser("free-owner");
    const org = await call(freeToken, "POST", "/v1/organizations", { name: "Free Tenant" });
    expect(org.status).toBe(201);
    expect(
      (await control("select plan from platform.organizations where slug = $1", [org.body.slug])).rows[0]
        .plan,
    ).toBe("free");
    const created = await call(freeToken, "POST", "/v1/projects", {
      name: "free tenant",
      organization_slug: org.body.slug,
      db_pass: "free-tenant-password",
    });
    expect(created.status).toBe(201);
    freeRef = created.body.ref;
    await until(
      async () => (await call(freeToken, "GET", `/v1/projects/${freeRef}`)).body.status === "ACTIVE_HEALTHY",
    );
  }, 180_000);
  afterAll(async () => {
    await admin?.end();
    await strata?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const tenants = () => [
    { plan: "free", token: freeToken, ref: freeRef },
    { plan: "enterprise", token: entToken, ref: entRef },
  ];

  it("marks the bootstrap admin as the installation's administrator, and no one else", async () => {
    const { rows } = await control("select email, is_installation_admin from platform.users order by email");
    expect(rows).toEqual([
      { email: "admin@strata.local", is_installation_admin: true },
      { email: "enterprise-owner@example.test", is_installation_admin: false },
      { email: "free-owner@example.test", is_installation_admin: false },
    ]);
  });

  it("refuses every cluster-wide setting and restart_database to tenants, applying nothing", async () => {
    const { rows } = await sql(
      "select name from pg_settings where context in ('sighup', 'postmaster') and name = any($1)",
      [Object.keys((await call(adminToken, "GET", `/v1/projects/${entRef}/config/database/postgres`)).body)],
    );
    const clusterFields = rows.map((r) => r.name as string);
    // Reload-time and start-time ones alike (the spec's list holds both kinds).
    expect(clusterFields).toEqual(
      expect.arrayContaining(["checkpoint_timeout", "max_wal_size", "max_connections"]),
    );
    const before = await clusterState();
    for (const tenant of tenants()) {
      const p = `/v1/projects/${tenant.ref}/config/database/postgres`;
      const current = (await call(tenant.token, "GET", p)).body;
      const own = await databaseSettings(await databaseOf(tenant.ref));
      // The value it already has is no change (the platform's CLI sends back every field it read): accepted,
      // and nothing is applied (checked below).
      const unchanged = Object.fromEntries(clusterFields.map((field) => [field, current[field]]));
      expect((await call(tenant.token, "PUT", p, unchanged)).status).toBe(200);
      for (const body of [
        { checkpoint_timeout: "7min" },
        { log_checkpoints: !current.log_checkpoints, wal_sender_timeout: "61s" },
        { max_locks_per_transaction: 128, restart_database: true },
        { shared_buffers: "256MB", restart_database: true },
        // A per-database setting beside a cluster-wide one: nothing of the body is applied.
        { work_mem: "24MB", checkpoint_timeout: "7min" },
        { work_mem: "24MB", restart_database: true },
        { restart_database: true },
      ]) {
        const res = await call(tenant.token, "PUT", p, body);
        expect({ plan: tenant.plan, body, status: res.status }).toEqual({
          plan: tenant.plan,
          body,
          status: 403,
        });
        expect(res.body.message).toMatch(/installation's administrators/);
        if ("restart_database" in body) expect(res.body.message).toMatch(/restart_database/);
      }
      // Nothing reached the project's own database either.
      expect(await databaseSettings(await databaseOf(tenant.ref))).toEqual(own);
    }
    // No ALTER SYSTEM, no reload with a changed value, no restart.
    expect(await clusterState()).toEqual(before);
  });

  it("applies a tenant's per-database settings to its own database only", async () => {
    const freeDb = await databaseOf(freeRef);
    const entDb = await databaseOf(entRef);
    const before = await clusterState();
    const entWorkMem = await show(entDb, "work_mem");
    const put = await call(freeToken, "PUT", `/v1/projects/${freeRef}/config/database/postgres`, {
      work_mem: "24MB",
      statement_timeout: "45s",
      restart_database: false,
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ work_mem: "24MB", statement_timeout: "45s" });
    expect(await databaseSettings(freeDb)).toEqual(
      expect.arrayContaining(["work_mem=24MB", "statement_timeout=45s"]),
    );
    expect(await show(freeDb, "work_mem")).toBe("24MB");
    // The other project's database, and the cluster, are as they were.
    expect(await databaseSettings(entDb)).not.toEqual(expect.arrayContaining(["work_mem=24MB"]));
    expect(await show(entDb, "work_mem")).toBe(entWorkMem);
    expect(await clusterState()).toEqual(before);
  });

  it("lets the installation admin change cluster-wide settings, but not through an OAuth application", async () => {
    const adminId = (await control("select id from platform.users where email = 'admin@strata.local'"))
      .rows[0].id;
    // The admin acts through a project of an organization it is a member of (the installation's own).
    const p = `/v1/projects/${entRef}/config/database/postgres`;
    // An OAuth application's token of the admin, with the scope the endpoint needs: the app is not the operator.
    const { rows: app } = await control(
      `insert into platform.oauth_apps (organization_id, name, client_id, client_secret_hash, redirect_uris, scopes)
       select id, 'app', 'client-' || gen_random_uuid(), 'x', '{https://app.example/cb}', '{database:write}'
         from platform.organizations where slug = 'default-org' returning id, organization_id`,
    );
    const oauth = await tokenOf(adminId, {
      scopes: ["database:write"],
      appId: app[0].id,
      orgId: app[0].organization_id,
    });
    const refused = await call(oauth, "PUT", p, { checkpoint_timeout: "9min" });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/installation's administrators/);
    expect(await show("postgres", "checkpoint_timeout")).not.toBe("9min");
    // A fine-grained token of the admin without the write permission: the permission decides first.
    const reader = await tokenOf(adminId, { permissions: ["database_config_read"] });
    expect((await call(reader, "PUT", p, { checkpoint_timeout: "9min" })).status).toBe(403);

    // The admin's own tokens: personal, and fine-grained with the permission.
    const applied = await call(adminToken, "PUT", p, { checkpoint_timeout: "7min" });
    expect(applied.status).toBe(200);
    expect(await show("postgres", "checkpoint_timeout")).toBe("7min");
    expect(readFileSync(path.join(dir, "pgdata", "postgresql.auto.conf"), "utf8")).toMatch(
      /checkpoint_timeout = '7min'/,
    );
    const writer = await tokenOf(adminId, { permissions: ["database_config_write"] });
    expect((await call(writer, "PUT", p, { checkpoint_timeout: "8min" })).status).toBe(200);
    expect(await show("postgres", "checkpoint_timeout")).toBe("8min");
  });

  it("keeps physical backups and WAL-replay restores to the installation admin; logical ones stay per project", async () => {
    const baseBackups = () => {
      const d = path.join(dir, "base-backups");
      return existsSync(d) ? readdirSync(d) : [];
    };
    for (const tenant of tenants()) {
      const res = await call(tenant.token, "POST", `/v1/projects/${tenant.ref}/database/backups`, {
        is_physical_backup: true,
      });
      expect({ plan: tenant.plan, status: res.status }).toEqual({ plan: tenant.plan, status: 403 });
      expect(res.body.message).toMatch(/whole PostgreSQL cluster/);
    }
    expect((await control("select count(*)::int as n from platform.physical_backups")).rows[0].n).toBe(0);
    expect(baseBackups()).toEqual([]);

    // The installation admin takes one.
    const started = await call(adminToken, "POST", `/v1/projects/${entRef}/database/backups`, {
      is_physical_backup: true,
    });
    expect(started.status).toBe(201);
    const listed = await until(async () => {
      const body = (await call(adminToken, "GET", `/v1/projects/${entRef}/database/backups`)).body;
      return body.backups.find((b: any) => b.is_physical_backup && b.status === "COMPLETED")
        ? body
        : undefined;
    });
    expect(listed).toMatchObject({ archiver_enabled: true, pitr_enabled: true });
    expect(baseBackups()).toEqual([String(started.body.id)]);

    // A tenant sees only its project's logical backups, and cannot restore by WAL replay from the cluster's.
    const seen = (await call(entToken, "GET", `/v1/projects/${entRef}/database/backups`)).body;
    expect(seen).toMatchObject({ archiver_enabled: false, pitr_enabled: false, physical_backup_data: {} });
    expect(seen.backups.filter((b: any) => b.is_physical_backup)).toEqual([]);
    const pitr = await call(entToken, "POST", `/v1/projects/${entRef}/database/backups/restore-pitr`, {
      recovery_time_target_unix: Math.floor(Date.now() / 1000),
    });
    expect(pitr.status).toBe(400);
    expect(pitr.body.message).toMatch(/WAL replay from the cluster's base backups is for the installation's/);
    expect((await control("select count(*)::int as n from platform.database_restores")).rows[0].n).toBe(0);

    // Logical backups stay each project's.
    for (const tenant of tenants()) {
      const logical = await call(tenant.token, "POST", `/v1/projects/${tenant.ref}/database/backups`, {});
      expect(logical.status).toBe(201);
      expect(logical.body.is_physical_backup).toBe(false);
      await until(async () => {
        const body = (await call(tenant.token, "GET", `/v1/projects/${tenant.ref}/database/backups`)).body;
        return (
          body.backups.find((b: any) => b.id === logical.body.id && !b.is_physical_backup)?.status ===
          "COMPLETED"
        );
      });
    }
  });

  it("keeps read replicas (a standby of the whole cluster and its slot) to the installation admin", async () => {
    for (const tenant of tenants()) {
      const setup = await call(tenant.token, "POST", `/v1/projects/${tenant.ref}/read-replicas/setup`, {
        read_replica_region: "local",
      });
      expect({ plan: tenant.plan, status: setup.status }).toEqual({ plan: tenant.plan, status: 403 });
      expect(setup.body.message).toMatch(/whole PostgreSQL cluster/);
      const remove = await call(tenant.token, "POST", `/v1/projects/${tenant.ref}/read-replicas/remove`, {
        database_identifier: `${tenant.ref}-rr-local-x`,
      });
      expect(remove.status).toBe(403);
    }
    expect((await control("select count(*)::int as n from platform.read_replicas")).rows[0].n).toBe(0);
    expect(
      (await sql("select count(*)::int as n from pg_replication_slots where slot_type = 'physical'")).rows[0]
        .n,
    ).toBe(0);
    expect(existsSync(path.join(dir, "replicas"))).toBe(false);
  });
  it("ignores what a tenant sets on the shared API roles: another project's data requests keep their limits", async () => {
    const entDb = await databaseOf(entRef);
    await sql(`create table public.notes (id int primary key, body text);
               insert into public.notes values (1, 'hello');
               grant select on public.notes to anon, authenticated;
               create function public.request_timeout() returns text language sql stable
                 as $$ select current_setting('statement_timeout') $$;
               grant execute on function public.request_timeout() to anon, authenticated, service_role`);
    // Tenant A, through its own SQL endpoint, as each shared role its owner may switch to: PostgreSQL lets a
    // role change its own defaults, everywhere and in B's database.
    for (const role of ["anon", "authenticated", "service_role"]) {
      const res = await call(freeToken, "POST", `/v1/projects/${freeRef}/database/query`, {
        query:
          `set role ${role}; alter role ${role} set statement_timeout = '1ms'; ` +
          `alter role ${role} in database "${entDb}" set statement_timeout = '1ms'; ` +
          `alter role ${role} in database "${entDb}" set lock_timeout = '1ms'`,
      });
      expect({ role, status: res.status }).toEqual({ role, status: 201 });
    }
    const { rows: stored } = await sql(
      `select r.rolname, coalesce(d.datname, '*') as db, s.setconfig from pg_db_role_setting s
         join pg_roles r on r.oid = s.setrole left join pg_database d on d.oid = s.setdatabase
        where r.rolname = 'anon' order by db`,
    );
    expect(stored).toEqual(
      expect.arrayContaining([
        { rolname: "anon", db: "*", setconfig: ["statement_timeout=1ms"] },
        { rolname: "anon", db: entDb, setconfig: ["statement_timeout=1ms", "lock_timeout=1ms"] },
      ]),
    );

    // B restarts (its APIs read every setting they apply anew), then serves its readers as before.
    expect((await call(entToken, "POST", `/v1/projects/${entRef}/restart`)).status).toBeLessThan(300);
    const signedIn = await new SignJWT({ role: "authenticated", sub: "8d0fd2b3-9ca7-4d9e-a95f-9e13dded323e" })
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("10m")
      .sign(new TextEncoder().encode(strata.info.jwt_secret));
    const rest = async (p: string, bearer?: string) => {
      const res = await fetch(`${base}/rest/v1${p}`, {
        headers: { apikey: strata.info.anon_key, ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
      });
      return { status: res.status, body: await res.json() };
    };
    expect(await rest("/notes?select=id,body")).toEqual({ status: 200, body: [{ id: 1, body: "hello" }] });
    expect(await rest("/notes?select=id", signedIn)).toEqual({ status: 200, body: [{ id: 1 }] });
    const graphql = await fetch(`${base}/graphql/v1`, {
      method: "POST",
      headers: { apikey: strata.info.anon_key, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ notesCollection { edges { node { id body } } } }" }),
    });
    expect(await graphql.json()).toEqual({
      data: { notesCollection: { edges: [{ node: { id: 1, body: "hello" } }] } },
    });
    // The platform's limits hold, not the tenant's.
    expect((await rest("/rpc/request_timeout")).body).toBe("3s");
    expect((await rest("/rpc/request_timeout", signedIn)).body).toBe("8s");
    const service = await fetch(`${base}/rest/v1/rpc/request_timeout`, {
      headers: { apikey: strata.info.service_role_key },
    });
    expect(await service.json()).not.toBe("1ms");

    // What B itself sets for its database (a per-database setting, its own) applies to its data requests.
    const put = await call(entToken, "PUT", `/v1/projects/${entRef}/config/database/postgres`, {
      statement_timeout: "5s",
    });
    expect(put.status).toBe(200);
    expect((await call(entToken, "POST", `/v1/projects/${entRef}/restart`)).status).toBeLessThan(300);
    expect((await rest("/rpc/request_timeout")).body).toBe("5s");
    expect((await rest("/rpc/request_timeout", signedIn)).body).toBe("5s");
    expect(await databaseSettings(await databaseOf(freeRef))).not.toEqual(
      expect.arrayContaining(["statement_timeout=5s"]),
    );
  });
});
