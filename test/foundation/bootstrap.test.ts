import pg from "pg";
import { applyBootstrap } from "../../src/db/bootstrap";
import { adminQuery, createTestDatabase, dropTestDatabase } from "../helpers/db";

describe("bootstrap SQL", () => {
  let url: string;
  beforeAll(async () => {
    url = await createTestDatabase();
  });
  afterAll(() => dropTestDatabase(url));

  async function asRole(role: string, claims: object, query: string): Promise<pg.QueryResult> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("begin");
      await client.query("select set_config('role', $1, true), set_config('request.jwt.claims', $2, true)", [
        role,
        JSON.stringify(claims),
      ]);
      return await client.query(query);
    } finally {
      await client.query("rollback").catch(() => {});
      await client.end();
    }
  }

  it("changes nothing when applied a second time", async () => {
    const before = await adminQuery("select set_name, version from _strata.bootstrap order by 1, 2", [], url);
    expect(await applyBootstrap(url, ["project"])).toEqual([]);
    const after = await adminQuery("select set_name, version from _strata.bootstrap order by 1, 2", [], url);
    expect(after.rows).toEqual(before.rows);
    expect(before.rows.length).toBeGreaterThan(0);
  });

  it("creates the platform's roles with their attributes", async () => {
    const { rows } = await adminQuery(
      `select rolname, rolcanlogin, rolinherit, rolbypassrls from pg_roles
        where rolname in ('anon', 'authenticated', 'service_role', 'authenticator') order by rolname`,
    );
    expect(rows).toEqual([
      { rolname: "anon", rolcanlogin: false, rolinherit: false, rolbypassrls: false },
      { rolname: "authenticated", rolcanlogin: false, rolinherit: false, rolbypassrls: false },
      { rolname: "authenticator", rolcanlogin: true, rolinherit: false, rolbypassrls: false },
      { rolname: "service_role", rolcanlogin: false, rolinherit: false, rolbypassrls: true },
    ]);
    const members = await adminQuery(
      `select r.rolname from pg_auth_members m join pg_roles r on r.oid = m.roleid
        join pg_roles u on u.oid = m.member where u.rolname = 'authenticator' order by 1`,
    );
    expect(members.rows.map((r) => r.rolname)).toEqual(
      expect.arrayContaining(["anon", "authenticated", "service_role"]),
    );
  });

  it("lets the API roles use tables created later in public; the control plane is not in this database", async () => {
    await adminQuery("create table public.note (id serial primary key, body text)", [], url);
    await adminQuery("insert into public.note (body) values ('hello')", [], url);
    for (const role of ["anon", "authenticated", "service_role"]) {
      const { rows } = await asRole(role, {}, "select body from public.note");
      expect(rows).toEqual([{ body: "hello" }]);
      await expect(asRole(role, {}, "select * from platform.projects")).rejects.toThrow(/does not exist/);
    }
  });

  it("reads the request's claims through auth.uid(), auth.role() and auth.jwt()", async () => {
    const sub = "8d0fd2b3-9ca9-4b48-8a35-63d3bb9e0b29";
    const { rows } = await asRole(
      "authenticated",
      { sub, role: "authenticated", email: "ann@example.com" },
      "select auth.uid() as uid, auth.role() as role, auth.jwt() ->> 'email' as email",
    );
    expect(rows).toEqual([{ uid: sub, role: "authenticated", email: "ann@example.com" }]);
    const anon = await asRole("anon", {}, "select auth.uid() as uid, auth.role() as role");
    expect(anon.rows).toEqual([{ uid: null, role: null }]);
  });
});
