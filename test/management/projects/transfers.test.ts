import { startTestServer, type TestServer } from "../../helpers/server";
import { atProjectHost, mgmt } from "../client";

describe("project transfers", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
  });
  afterAll(() => server.stop());

  it("previews and transfers a project to another organization, keeping its data, keys and host", async () => {
    const ref = server.ref;
    await server.sql(
      "create table public.things (id int primary key, name text); insert into public.things values (1, 'kept')",
    );
    await mgmt(server, "POST", `/v1/projects/${ref}/restart`);
    const target = (await mgmt(server, "POST", "/v1/organizations", { body: { name: "Team B" } })).body;
    const to = (slug: string) => ({
      body: { data: { type: "project_transfer", attributes: { target_organization_slug: slug } } },
    });

    const preview = await mgmt(server, "POST", `/v2/projects/${ref}/transfers/previews`, to(target.slug));
    expect(preview.status).toBe(200);
    expect(preview.body.data).toMatchObject({
      type: "project_transfer_result",
      attributes: { valid: true, errors: [] },
    });
    expect(preview.body.data.attributes.info.map((i: any) => i.key)).toEqual(["data", "members"]);

    const unknown = await mgmt(server, "POST", `/v2/projects/${ref}/transfers/previews`, to("no-such-org"));
    expect(unknown.body.data.attributes).toMatchObject({
      valid: false,
      errors: [{ key: "target_organization" }],
    });
    // The caller must administer the target organization.
    await server.controlSql(
      "update platform.organization_members set role_name = 'Developer' where organization_id = (select id from platform.organizations where slug = $1)",
      [target.slug],
    );
    const developer = await mgmt(server, "POST", `/v2/projects/${ref}/transfers/previews`, to(target.slug));
    expect(developer.body.data.attributes.errors.map((e: any) => e.key)).toEqual([
      "target_organization_role",
    ]);
    expect((await mgmt(server, "POST", `/v2/projects/${ref}/transfers`, to(target.slug))).status).toBe(403);
    await server.controlSql(
      "update platform.organization_members set role_name = 'Owner' where organization_id = (select id from platform.organizations where slug = $1)",
      [target.slug],
    );

    const bad = [
      await mgmt(server, "POST", `/v2/projects/${ref}/transfers`, { body: {} }),
      await mgmt(server, "POST", `/v2/projects/${ref}/transfers`, { body: { data: { attributes: {} } } }),
      await mgmt(server, "POST", `/v2/projects/${ref}/transfers`, to("default-org")),
      await mgmt(server, "POST", `/v2/projects/${ref}/transfers`, to("no-such-org")),
    ];
    expect(bad.map((r) => r.status)).toEqual([400, 400, 400, 404]);
    for (const r of bad) expect(typeof r.body.message).toBe("string");
    expect(
      (
        await server.controlSql(
          "select o.slug from platform.projects p join platform.organizations o on o.id = p.organization_id where p.ref = $1",
          [ref],
        )
      ).rows[0].slug,
    ).toBe("default-org");

    const moved = await mgmt(server, "POST", `/v2/projects/${ref}/transfers`, to(target.slug));
    expect(moved).toMatchObject({ status: 200, body: {} });
    const listed = async (slug: string) =>
      (await mgmt(server, "GET", `/v1/organizations/${slug}/projects`)).body.projects.map((p: any) => p.ref);
    expect(await listed(target.slug)).toContain(ref);
    expect(await listed("default-org")).not.toContain(ref);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).body.organization_slug).toBe(target.slug);
    // Same data, same keys, same host.
    const read = await atProjectHost(server, ref, "/rest/v1/things?select=name", { apikey: server.anonKey });
    expect(read).toMatchObject({ status: 200, body: [{ name: "kept" }] });
  });

  it("describes the branch, OAuth and transfer bodies in /v1/openapi.json", async () => {
    const doc: any = await (await fetch(`${server.url}/v1/openapi.json`)).json();
    const body = (path: string, method: string) =>
      doc.paths[path][method].requestBody.content["application/json"].schema;
    const ok = (path: string, method: string, status: number) =>
      doc.paths[path][method].responses[status].content["application/json"].schema;
    expect(body("/v1/projects/{ref}/branches", "post").required).toEqual(["branch_name"]);
    expect(Object.keys(ok("/v1/projects/{ref}/branches", "post", 201).properties)).toEqual(
      expect.arrayContaining(["id", "project_ref", "parent_project_ref", "status", "with_data"]),
    );
    expect(ok("/v1/branches/{branch_id_or_ref}/merge", "post", 201).required).toEqual([
      "workflow_run_id",
      "message",
    ]);
    expect(ok("/v1/projects/{ref}/actions/{run_id}", "get", 200).properties.run_steps.type).toBe("array");
    expect(body("/v1/oauth/token", "post").properties.grant_type.enum).toContain("refresh_token");
    expect(ok("/v1/oauth/token", "post", 200).required).toEqual(
      expect.arrayContaining(["access_token", "refresh_token", "expires_in", "token_type"]),
    );
    expect(body("/v1/oauth/revoke", "post").required).toEqual([
      "client_id",
      "client_secret",
      "refresh_token",
    ]);
    expect(body("/v2/projects/{ref}/transfers", "post").required).toEqual(["data"]);
    expect(
      ok("/v2/projects/{ref}/transfers/previews", "post", 200).properties.data.properties.type.const,
    ).toBe("project_transfer_result");
  });
});
