import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

describe("organizations, members, roles and profile", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("creates an organization whose creator is its owner", async () => {
    const created = await mgmt(server, "POST", "/v1/organizations", { body: { name: "Acme Widgets" } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: expect.any(String), slug: "acme-widgets", name: "Acme Widgets" });
    // A second organization of the same name gets a slug of its own.
    const twin = await mgmt(server, "POST", "/v1/organizations", { body: { name: "Acme Widgets" } });
    expect(twin.body.slug).toMatch(/^acme-widgets-[a-z]{6}$/);

    const list = await mgmt(server, "GET", "/v1/organizations");
    expect(list.body.map((o: any) => o.slug)).toEqual(["default-org", "acme-widgets", twin.body.slug]);

    const detail = await mgmt(server, "GET", "/v1/organizations/acme-widgets");
    expect(detail.body).toMatchObject({
      id: created.body.id,
      name: "Acme Widgets",
      plan: "free",
      opt_in_tags: [],
    });
    const members = await mgmt(server, "GET", "/v1/organizations/acme-widgets/members");
    expect(members.body).toEqual([
      expect.objectContaining({ user_name: "admin", email: "admin@strata.local", role_name: "Owner" }),
    ]);
    const entitlements = await mgmt(server, "GET", "/v1/organizations/acme-widgets/entitlements");
    expect(entitlements.body.entitlements[0]).toMatchObject({ hasAccess: true, config: { enabled: true } });
  });

  it("rejects a nameless organization and unknown slugs", async () => {
    const nameless = await mgmt(server, "POST", "/v1/organizations", { body: {} });
    expect(nameless.status).toBe(400);
    expect(nameless.body.message).toMatch(/name/);
    for (const path of ["", "/members", "/entitlements", "/projects"]) {
      expect((await mgmt(server, "GET", `/v1/organizations/no-such-org${path}`)).status).toBe(404);
    }
    expect((await mgmt(server, "GET", "/v2/organizations/no-such-org/members")).status).toBe(404);
  });

  it("hides organizations the caller does not belong to", async () => {
    await server.controlSql(
      "insert into platform.organizations (slug, name) values ('someone-else', 'Someone Else')",
    );
    expect((await mgmt(server, "GET", "/v1/organizations/someone-else")).status).toBe(404);
    const list = await mgmt(server, "GET", "/v1/organizations");
    expect(list.body.map((o: any) => o.slug)).not.toContain("someone-else");
  });

  it("pages v2 members with page[size], page[after], page[before] and links", async () => {
    const org = (await mgmt(server, "POST", "/v1/organizations", { body: { name: "Paged" } })).body;
    await server.controlSql(
      `with u as (insert into platform.users (email, username)
                  select 'user' || i || '@example.test', 'user' || i from generate_series(1, 4) i returning id)
       insert into platform.organization_members (organization_id, user_id, role_name)
       select (select id from platform.organizations where slug = $1), id, 'Developer' from u`,
      [org.slug],
    );
    const base = `/v2/organizations/${org.slug}/members`;
    const first = await mgmt(server, "GET", `${base}?page[size]=2`);
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(2);
    expect(first.body.data[0]).toMatchObject({
      type: "organization_member",
      attributes: { roles: [expect.any(Object)] },
    });
    expect(first.body.links.prev).toBeNull();
    expect(first.body.links.first).toBe(`${base}?page[size]=2`);

    const seen = [...first.body.data];
    let next = first.body.links.next;
    while (next) {
      const page = await mgmt(server, "GET", next);
      seen.push(...page.body.data);
      next = page.body.links.next;
    }
    const ids = seen.map((m) => m.id);
    expect(ids).toHaveLength(5);
    expect(new Set(ids).size).toBe(5);

    const back = await mgmt(server, "GET", `${base}?page[size]=2&page[before]=${ids[4]}`);
    expect(back.body.data.map((m: any) => m.id)).toEqual([ids[2], ids[3]]);
    const last = await mgmt(server, "GET", first.body.links.last);
    expect(last.body.data.map((m: any) => m.id)).toEqual([ids[3], ids[4]]);
    expect((await mgmt(server, "GET", `${base}?page[size]=0`)).status).toBe(400);

    const roles = await mgmt(server, "GET", `/v2/organizations/${org.slug}/roles`);
    expect(roles.body.data.map((r: any) => r.attributes.name)).toEqual([
      "Owner",
      "Administrator",
      "Developer",
      "Read-only",
    ]);
    expect(roles.body.data[0]).toMatchObject({ type: "organization_role", attributes: { base_role_id: 1 } });
  });

  it("shows the caller's profile", async () => {
    const profile = await mgmt(server, "GET", "/v1/profile");
    expect(profile.body).toMatchObject({ primary_email: "admin@strata.local", username: "admin" });
    expect(profile.body.authsvc_id).toEqual(expect.any(String));
  });
});
