import { startTestServer, type TestServer } from "../helpers/server";
import { atProjectHost, mgmt, waitForStatus } from "../management/client";

/**
 * PostgreSQL lets any role change its own defaults in every database (`alter role x in database y set ...`),
 * and a tenant's function reaches the login role of its session with `reset role`. These attacks come from
 * project A's anonymous users (an RPC) and aim at project B on the same cluster.
 */
describe("Roles shared by the projects of a cluster", () => {
  let server: TestServer;
  let other: string;
  let otherDb: string;
  let otherAnon: string;

  const sqlAs = (ref: string, query: string) =>
    mgmt(server, "POST", `/v1/projects/${ref}/database/query`, { body: { query } });

  /** Calls `public.attack(statement)` of project A as its anonymous user: the statement's error or "done". */
  async function attackFromA(statement: string): Promise<string> {
    const res = await fetch(`${server.url}/rest/v1/rpc/attack`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ statement }),
    });
    return res.json();
  }

  beforeAll(async () => {
    server = await startTestServer();
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "neighbour", organization_slug: "default-org", db_pass: "neighbour-password" },
    });
    expect(created.status).toBe(201);
    other = created.body.ref;
    await waitForStatus(server, other, "ACTIVE_HEALTHY");
    otherDb = (await server.controlSql("select database_name from platform.projects where ref = $1", [other]))
      .rows[0].database_name;
    const keys = await mgmt(server, "GET", `/v1/projects/${other}/api-keys`);
    otherAnon = keys.body.find((k: { name: string }) => k.name === "anon").api_key;
    expect(
      (await sqlAs(other, "create table notes (id int primary key); grant all on notes to anon")).status,
    ).toBe(201);
    // A function any anonymous caller of project A may run: it leaves the API role and runs `statement`.
    expect(
      (
        await sqlAs(
          server.ref,
          `create function public.attack(statement text) returns text language plpgsql as $$
           begin
             execute 'reset role';
             execute statement;
             return 'done';
           exception when others then return sqlerrm;
           end $$;
           grant execute on function public.attack(text) to anon;`,
        )
      ).status,
    ).toBe(201);
  });
  afterAll(async () => {
    for (const role of ["authenticator", `authenticator_${server.ref}`])
      await server.sql(`alter role ${role} in database ${otherDb} reset all`).catch(() => {});
    await server.stop();
  });

  it("runs a project's data requests as a login of its own, which reaches no other project", async () => {
    expect(await attackFromA("select 1")).toBe("done");
    const session = await server.sql(
      "select distinct usename from pg_stat_activity where datname = current_database() and usename like 'authenticator%'",
    );
    expect(session.rows.map((r) => r.usename)).toEqual([`authenticator_${server.ref}`]);
    // B's login is not A's to change, and the shared role's defaults open no project's database.
    expect(
      await attackFromA(
        `alter role authenticator_${other} in database ${otherDb} set statement_timeout = '1ms'`,
      ),
    ).toMatch(/permission denied/);
    // What they may change is inert: the shared role opens no project's database, A's login opens only A's.
    // (Defaults for every database would reach other tests sharing this cluster: only B's database is aimed at.)
    for (const statement of [
      `set role authenticator; alter role authenticator in database ${otherDb} set default_transaction_read_only = on`,
      `set role authenticator; alter role authenticator in database ${otherDb} set statement_timeout = '1ms'`,
      `alter role authenticator_${server.ref} in database ${otherDb} set default_transaction_read_only = on`,
    ])
      expect(await attackFromA(statement)).toBe("done");
    // A session left in an API role for good (`set role`, not `set local`) is still served: each request sets
    // its own role, and the schema check ahead of it is readable by any role (sql/project/821).
    expect(await attackFromA("set role anon")).toBe("done");
    expect(await attackFromA("select 1")).toBe("done");

    // B's data requests open new connections (a restart) and still read and write.
    expect((await mgmt(server, "POST", `/v1/projects/${other}/restart`)).status).toBeLessThan(300);
    const write = await atProjectHost(server, other, "/rest/v1/notes", {
      apikey: otherAnon,
      body: { id: 1 },
    });
    expect(write).toEqual({ status: 201, body: undefined });
    const read = await atProjectHost(server, other, "/rest/v1/notes?select=id", { apikey: otherAnon });
    expect(read).toEqual({ status: 200, body: [{ id: 1 }] });
    // Second channel: B's login carries no default of anyone else's making.
    const settings = await server.sql(
      `select s.setconfig from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
        where r.rolname = $1`,
      [`authenticator_${other}`],
    );
    expect(settings.rows).toEqual([]);
    expect(
      (await server.sql(`select count(*)::int as n from pg_database where datname = $1`, [otherDb])).rows[0]
        .n,
    ).toBe(1);
  });

  it("lets the shared login into no project's database", async () => {
    const { rows } = await server.sql(
      "select has_database_privilege('authenticator', $1, 'connect') as other, has_database_privilege('authenticator', current_database(), 'connect') as own",
      [otherDb],
    );
    expect(rows).toEqual([{ other: false, own: false }]);
  });
});
