import pg from "pg";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

describe("Management API: SQL, migrations and login roles", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
  });
  afterAll(() => server.stop());

  const rest = (path: string) =>
    fetch(`${server.url}/rest/v1${path}`, { headers: { apikey: server.anonKey } });

  it("runs SQL with parameters and answers rows in the SELECT's column order", async () => {
    const ddl = await mgmt(server, "POST", `${base}/database/query`, {
      body: {
        query:
          "create table gadgets (id int primary key, name text); insert into gadgets values (1, 'lever'), (2, 'pulley')",
      },
    });
    expect(ddl.status).toBe(201);
    // DDL through the API is visible to the very next data request.
    expect(await (await rest("/gadgets?select=name&order=id")).json()).toEqual([
      { name: "lever" },
      { name: "pulley" },
    ]);
    const rows = await mgmt(server, "POST", `${base}/database/query`, {
      body: {
        query: "select name, id, id * 2 as twice from gadgets where id = $1",
        parameters: [2],
      },
    });
    expect(rows.body).toEqual([{ name: "pulley", id: 2, twice: 4 }]);
    expect(Object.keys(rows.body[0])).toEqual(["name", "id", "twice"]);
  });

  it("refuses writes in read-only mode and reports SQL errors as 400", async () => {
    const ro = await mgmt(server, "POST", `${base}/database/query`, {
      body: {
        query: "delete from gadgets",
        read_only: true,
      },
    });
    expect(ro.status).toBe(400);
    expect(ro.body.message).toMatch(/read-only/);
    const roEndpoint = await mgmt(server, "POST", `${base}/database/query/read-only`, {
      body: {
        query: "select count(*)::int as n from public.gadgets",
      },
    });
    expect({ status: roEndpoint.status, body: roEndpoint.body }).toEqual({ status: 201, body: [{ n: 2 }] });
    const bad = await mgmt(server, "POST", `${base}/database/query`, {
      body: {
        query: "select * from no_such_table",
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/does not exist/);
    const missing = await mgmt(server, "POST", `${base}/database/query`, { body: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/query/);
  });

  it("applies a migration in one transaction, lists it and rolls it back", async () => {
    const applied = await mgmt(server, "POST", `${base}/database/migrations`, {
      body: {
        name: "add_widgets",
        query: "create table widgets (id int primary key); insert into widgets values (7)",
        rollback: "drop table widgets",
      },
    });
    expect(applied.status).toBe(200);
    // The very next data requests see the migration, through REST and through GraphQL.
    expect(await (await rest("/widgets")).json()).toEqual([{ id: 7 }]);
    const gql = await fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { apiKey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ query: "{ widgetsCollection { edges { node { id } } } }" }),
    });
    expect(await gql.json()).toEqual({ data: { widgetsCollection: { edges: [{ node: { id: 7 } }] } } });
    const list = await mgmt(server, "GET", `${base}/database/migrations`);
    expect(list.body).toEqual([{ version: expect.stringMatching(/^\d{14}$/), name: "add_widgets" }]);
    const failing = await mgmt(server, "POST", `${base}/database/migrations`, {
      body: {
        name: "half",
        query: "create table half_done (id int); select 1/0",
      },
    });
    expect(failing.status).toBe(400);
    expect(
      (
        await mgmt(server, "POST", `${base}/database/query`, {
          body: {
            query: "select to_regclass('half_done') as t",
          },
        })
      ).body,
    ).toEqual([{ t: null }]);
    const version = list.body[0].version;
    expect((await mgmt(server, "DELETE", `${base}/database/migrations?gte=${version}`)).status).toBe(200);
    expect((await rest("/widgets")).status).toBe(404);
    expect((await mgmt(server, "GET", `${base}/database/migrations`)).body).toEqual([]);
  });

  it("issues a temporary login role whose credentials connect until its TTL passes", async () => {
    const issued = await mgmt(server, "POST", `${base}/cli/login-role`, {
      body: { read_only: true, ttl_seconds: 2 },
    });
    expect(issued.status).toBe(201);
    const url = new URL(server.dbUrl);
    url.username = issued.body.role;
    url.password = issued.body.password;
    const connect = async () => {
      const client = new pg.Client({ connectionString: url.toString() });
      await client.connect();
      try {
        return (await client.query("select count(*)::int as n from public.gadgets")).rows[0].n;
      } finally {
        await client.end();
      }
    };
    expect(await connect()).toBe(2);
    await new Promise((r) => setTimeout(r, 2500));
    await expect(connect()).rejects.toThrow(/password authentication failed|expired/);
    expect((await mgmt(server, "DELETE", `${base}/cli/login-role`)).status).toBe(200);
  });

  it("changes the owner role's password for real", async () => {
    const res = await mgmt(server, "PATCH", `${base}/database/password`, {
      body: {
        password: "correct-horse-battery",
      },
    });
    expect(res.status).toBe(200);
    const url = new URL(server.dbUrl);
    url.username = `postgres_${server.ref}`;
    url.password = "correct-horse-battery";
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    expect((await client.query("select current_user as u")).rows[0].u).toBe(`postgres_${server.ref}`);
    await client.end();
  });
});
