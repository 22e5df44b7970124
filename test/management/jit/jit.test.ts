import pg from "pg";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

describe("Management API: just-in-time database access", () => {
  let server: TestServer;
  let base: string;
  let userId: string;
  let database: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
    userId = (await server.controlSql("select id::text from platform.users order by created_at limit 1"))
      .rows[0].id;
    database = new URL(server.dbUrl).pathname.slice(1);
  });
  afterAll(() => server.stop());

  async function tryConnect(user: string, password: string): Promise<string> {
    const url = new URL(server.dbUrl);
    url.username = user;
    url.password = password;
    const client = new pg.Client({ connectionString: url.toString() });
    client.on("error", () => {});
    try {
      await client.connect();
      const { rows } = await client.query("select current_user as me, pg_has_role($1, 'member') as owner", [
        `postgres_${server.ref}`,
      ]);
      await client.end();
      return rows[0].owner ? `connected as owner` : `connected`;
    } catch (e) {
      await client.end().catch(() => {});
      return (e as Error).message;
    }
  }

  it("maps a member to a role, answers a login on request that stops working at its expiry", async () => {
    const expiresAt = Math.floor(Date.now() / 1000) + 4;
    const put = await mgmt(server, "PUT", `${base}/database/jit`, {
      body: {
        user_id: userId,
        roles: [
          { role: "postgres", expires_at: expiresAt },
          { role: "supabase_read_only_user", allowed_networks: { allowed_cidrs: [{ cidr: "10.0.0.0/8" }] } },
        ],
      },
    });
    expect(put.status).toBe(200);
    expect(put.body.user_roles).toHaveLength(2);
    expect((await mgmt(server, "GET", `${base}/database/jit`)).body.user_roles[0]).toMatchObject({
      role: "postgres",
      expires_at: expiresAt,
    });
    // Until JIT access is enabled, no login is handed out.
    const request = { role: "postgres", rhost: "127.0.0.1" };
    expect((await mgmt(server, "POST", `${base}/database/jit`, { body: request })).status).toBe(403);
    expect((await mgmt(server, "PUT", `${base}/jit-access`, { body: { state: "enabled" } })).body).toEqual({
      state: "enabled",
      appliedSuccessfully: true,
    });
    const granted = await mgmt(server, "POST", `${base}/database/jit`, { body: request });
    expect(granted.status).toBe(200);
    expect(await tryConnect(granted.body.db_user, granted.body.db_password)).toBe("connected as owner");
    // The role's VALID UNTIL is the mapping's expiry, as Postgres records it.
    const { rows } = await server.sql(
      "select extract(epoch from rolvaliduntil)::int as until from pg_roles where rolname = $1",
      [granted.body.db_user],
    );
    expect(rows[0].until).toBe(expiresAt);
    // Outside the allowed networks, or a role not mapped: refused.
    expect(
      (
        await mgmt(server, "POST", `${base}/database/jit`, {
          body: {
            role: "supabase_read_only_user",
            rhost: "192.0.2.1",
          },
        })
      ).status,
    ).toBe(403);
    expect(
      (
        await mgmt(server, "POST", `${base}/database/jit`, {
          body: { role: "service_role", rhost: "127.0.0.1" },
        })
      ).status,
    ).toBe(403);
    // After the expiry, Postgres itself refuses the password.
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt * 1000 - Date.now()) + 1500));
    expect(await tryConnect(granted.body.db_user, granted.body.db_password)).toMatch(
      /password authentication failed/,
    );
    expect((await mgmt(server, "POST", `${base}/database/jit`, { body: request })).status).toBe(403);
  });

  it("lists, invites, accepts, revokes and removes", async () => {
    const reader = await mgmt(server, "POST", `${base}/database/jit`, {
      body: {
        role: "supabase_read_only_user",
        rhost: "10.1.2.3",
      },
    });
    expect(reader.status).toBe(200);
    expect(await tryConnect(reader.body.db_user, reader.body.db_password)).toBe("connected");

    const email = (await server.controlSql("select email from platform.users where id = $1", [userId]))
      .rows[0].email;
    const invite = await mgmt(server, "POST", `${base}/database/jit/invite`, {
      body: {
        email,
        roles: [{ role: "authenticated" }],
      },
    });
    expect(invite.status).toBe(200);
    const listed = (await mgmt(server, "GET", `${base}/database/jit/list`)).body.items;
    expect(listed.some((i: { invite_id: string }) => i.invite_id === invite.body.invite_id)).toBe(true);
    expect(listed.some((i: { user_id: string }) => i.user_id === userId)).toBe(true);
    expect(
      (await mgmt(server, "POST", `${base}/database/jit/invite/accept`, { body: { email, token: "wrong" } }))
        .status,
    ).toBe(404);
    const accepted = await mgmt(server, "POST", `${base}/database/jit/invite/accept`, {
      body: {
        email,
        token: invite.body.token,
      },
    });
    expect(accepted.status).toBe(200);
    expect(accepted.body.user_roles.map((r: { role: string }) => r.role).sort()).toEqual([
      "authenticated",
      "postgres",
      "supabase_read_only_user",
    ]);

    const other = await mgmt(server, "POST", `${base}/database/jit/invite`, {
      body: {
        email: "someone@example.com",
        roles: [{ role: "anon" }],
      },
    });
    expect((await mgmt(server, "DELETE", `${base}/database/jit/invite/${other.body.invite_id}`)).status).toBe(
      200,
    );
    expect((await mgmt(server, "DELETE", `${base}/database/jit/invite/${other.body.invite_id}`)).status).toBe(
      404,
    );

    // Removing the member's mappings drops its logins at once.
    expect((await mgmt(server, "DELETE", `${base}/database/jit/${userId}`)).status).toBe(200);
    expect(await tryConnect(reader.body.db_user, reader.body.db_password)).toMatch(
      /password authentication failed/,
    );
    expect(
      (
        await server.sql("select count(*)::int as n from pg_roles where rolname like $1", [
          `jit\\_${server.ref}\\_%`,
        ])
      ).rows[0].n,
    ).toBe(0);
    expect(database).toBeTruthy();
  });

  it("refuses bad input with 400", async () => {
    for (const body of [
      { user_id: userId, roles: [{ role: "pg_read_server_files" }] },
      { user_id: "not-a-uuid", roles: [] },
      {
        user_id: userId,
        roles: [{ role: "anon", allowed_networks: { allowed_cidrs: [{ cidr: "10.0.0.1/8" }] } }],
      },
      { user_id: "00000000-0000-4000-8000-000000000000", roles: [] },
    ])
      expect((await mgmt(server, "PUT", `${base}/database/jit`, { body: body })).status).toBe(400);
  });
});
