import pg from "pg";
import { newAccessToken, sha256 } from "../../src/platform/ids";
import { startTestServer, TEST_AUTHENTICATOR_PASSWORD, type TestServer } from "../helpers/server";
import { mgmt, waitForStatus } from "../management/client";

/** Connects with `role`/`password` to `database` on the test cluster; answers the error message on refusal. */
async function tryConnect(server: TestServer, role: string, password: string, database: string) {
  const url = new URL(server.dbUrl);
  url.username = role;
  url.password = password;
  url.pathname = `/${database}`;
  const client = new pg.Client({ connectionString: url.toString() });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.query("select 1");
    return "connected";
  } catch (e) {
    return (e as Error).message;
  } finally {
    await client.end().catch(() => {});
  }
}

describe("Least privilege in the database", () => {
  let server: TestServer;
  const sql = (query: string, opts: { token?: string; readOnly?: boolean; ref?: string } = {}) =>
    mgmt(server, "POST", `/v1/projects/${opts.ref ?? server.ref}/database/query`, {
      token: opts.token,
      body: { query, ...(opts.readOnly ? { read_only: true } : {}) },
    });
  async function tokenFor(opts: { permissions?: string[]; role?: string }): Promise<string> {
    const token = newAccessToken();
    let userId: string;
    if (opts.role) {
      const { rows } = await server.controlSql(
        `with u as (insert into platform.users (email, username) values ($1, $1) returning id)
         insert into platform.organization_members (organization_id, user_id, role_name)
         select o.id, u.id, $2 from platform.organizations o, u where o.slug = 'default-org' returning user_id`,
        [`${opts.role.toLowerCase()}-${Math.random()}@example.test`, opts.role],
      );
      userId = rows[0].user_id;
    } else {
      userId = (await server.controlSql("select id from platform.users where email = 'admin@strata.local'"))
        .rows[0].id;
    }
    await server.controlSql(
      `insert into platform.access_tokens (user_id, name, token_hash, token_prefix, permissions)
       values ($1, 'test', $2, $3, $4)`,
      [userId, sha256(token), token.slice(0, 8), opts.permissions ?? null],
    );
    return token;
  }

  beforeAll(async () => {
    server = await startTestServer();
    expect(
      (await sql("create table notes (id int primary key, body text); insert into notes values (1, 'hi')"))
        .status,
    ).toBe(201);
  });
  afterAll(() => server.stop());

  it("runs the SQL endpoint as the project's owner, which cannot reach the host, other databases or the control plane", async () => {
    const whoami = await sql(
      "select current_user, session_user, (select rolsuper from pg_roles where rolname = current_user) as su",
    );
    expect(whoami.body).toEqual([
      { current_user: `postgres_${server.ref}`, session_user: `strata_sql_${server.ref}`, su: false },
    ]);
    for (const attack of [
      "copy notes from program 'id'",
      "select pg_read_file('/etc/passwd')",
      "select * from platform.projects",
      "select * from platform.access_tokens",
      `alter role postgres_${server.ref} superuser`,
      "create role intruder superuser login password 'x'",
      "set role postgres",
      "drop database postgres",
      // Extensions that open connections to other databases are out of reach too.
      "create extension dblink",
      "create extension postgres_fdw",
    ]) {
      const res = await sql(attack);
      expect({ attack, status: res.status }).toEqual({ attack, status: 400 });
    }
    // What it may do: its own tables, switching to the API roles.
    expect((await sql("set local role authenticated; select count(*)::int as n from notes")).body).toEqual([
      { n: 1 },
    ]);
    const roles = await server.sql("select rolname from pg_roles where rolname = 'intruder'");
    expect(roles.rowCount).toBe(0);
  });

  it("gives read-only SQL a role that reads the project's tables and nothing of the control plane", async () => {
    expect((await sql("select body from notes", { readOnly: true })).body).toEqual([{ body: "hi" }]);
    expect((await sql("insert into notes values (2, 'no')", { readOnly: true })).status).toBe(400);
    expect(
      (await sql("set transaction read write; insert into notes values (2, 'no')", { readOnly: true }))
        .status,
    ).toBe(400);
    expect((await sql("select jwt_secret from platform.projects", { readOnly: true })).status).toBe(400);
    expect((await sql("select * from pg_authid", { readOnly: true })).status).toBe(400);
    const reader = await tokenFor({ permissions: ["database_read"] });
    expect((await sql("select token_hash from platform.access_tokens", { token: reader })).status).toBe(400);
    expect((await sql("delete from notes", { token: reader })).status).toBe(400);
    // A Read-only member of the organization cannot write either, whatever its token allows.
    const member = await tokenFor({ role: "Read-only" });
    expect((await sql("select count(*)::int as n from notes", { token: member })).body).toEqual([{ n: 1 }]);
    expect((await sql("delete from notes", { token: member })).status).toBe(400);
    expect((await server.sql("select count(*)::int as n from notes")).rows[0].n).toBe(1);
  });

  it("keeps each project's logins inside its own database and drops its roles with it", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "neighbour", organization_slug: "default-org", db_pass: "neighbour-password" },
    });
    expect(created.status).toBe(201);
    const other = created.body.ref as string;
    await waitForStatus(server, other, "ACTIVE_HEALTHY");
    expect(
      (await sql("create table private (secret text); insert into private values ('theirs')", { ref: other }))
        .status,
    ).toBe(201);
    const otherDb = (
      await server.controlSql("select database_name from platform.projects where ref = $1", [other])
    ).rows[0].database_name as string;
    const ownDb = new URL(server.dbUrl).pathname.slice(1);
    // db_pass is the new project's owner password (set right after it becomes active).
    let owner = "";
    for (let i = 0; i < 50 && owner !== "connected"; i++) {
      owner = await tryConnect(server, `postgres_${other}`, "neighbour-password", otherDb);
      if (owner !== "connected") await new Promise((r) => setTimeout(r, 100));
    }
    expect(owner).toBe("connected");
    expect(await tryConnect(server, `postgres_${other}`, "neighbour-password", ownDb)).toMatch(
      /permission denied/,
    );

    const login = await mgmt(server, "POST", `/v1/projects/${server.ref}/cli/login-role`, {
      body: { read_only: false },
    });
    expect(login.status).toBe(201);
    expect(await tryConnect(server, login.body.role, login.body.password, ownDb)).toBe("connected");
    expect(await tryConnect(server, login.body.role, login.body.password, otherDb)).toMatch(
      /permission denied/,
    );
    expect(await tryConnect(server, login.body.role, login.body.password, "postgres")).toMatch(
      /permission denied/,
    );
    // Nor the control plane's database, nor does the main database hold any of it.
    for (const [role, pass] of [
      [login.body.role, login.body.password],
      ["authenticator", TEST_AUTHENTICATOR_PASSWORD],
    ])
      expect(await tryConnect(server, role, pass, `${ownDb}_control`)).toMatch(/permission denied/);
    expect((await server.sql("select to_regnamespace('platform') as s")).rows).toEqual([{ s: null }]);

    const password = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/database/password`, {
      body: { password: "owner-password-1" },
    });
    expect(password.status).toBe(200);
    expect(await tryConnect(server, `postgres_${server.ref}`, "owner-password-1", ownDb)).toBe("connected");
    expect(await tryConnect(server, `postgres_${server.ref}`, "owner-password-1", otherDb)).toMatch(
      /permission denied/,
    );

    const memberships = await server.sql(
      `select g.rolname from pg_auth_members m join pg_roles g on g.oid = m.roleid join pg_roles r on r.oid = m.member
        where r.rolname like any(array[$1, $2, $3]) and g.rolname like 'pg\\_%'`,
      [`postgres_${server.ref}`, `strata_%_${server.ref}`, `cli_login_${server.ref}_%`],
    );
    expect(memberships.rows).toEqual([]);
    // No shared role reads every database any more.
    const shared = await server.sql(
      `select r.rolname from pg_auth_members m join pg_roles g on g.oid = m.roleid join pg_roles r on r.oid = m.member
        where g.rolname in ('pg_read_all_data', 'pg_write_all_data') and not r.rolsuper`,
    );
    expect(shared.rows).toEqual([]);

    expect((await mgmt(server, "DELETE", `/v1/projects/${other}`)).status).toBe(200);
    const left = await server.sql("select rolname from pg_roles where rolname like '%' || $1 || '%'", [
      other,
    ]);
    expect(left.rows).toEqual([]);
  });
});
