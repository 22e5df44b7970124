import { newAccessToken, sha256 } from "../../src/platform/ids";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";

/** What Studio's SQL editor relies on: saved snippets (read back by the spec's endpoints), errors with positions. */
describe("snippets and SQL errors for Studio", () => {
  let server: TestServer;
  let outsider: string;
  beforeAll(async () => {
    server = await startTestServer();
    // A user of another organization, with a token of their own.
    const { rows } = await server.controlSql(
      `with u as (insert into platform.users (email, username) values ('outsider@example.test', 'outsider') returning id),
            o as (insert into platform.organizations (name, slug) values ('Outside', 'outside-org') returning id)
       insert into platform.organization_members (organization_id, user_id, role_name)
       select o.id, u.id, 'Owner' from o, u returning user_id`,
    );
    outsider = newAccessToken();
    await server.controlSql(
      "insert into platform.access_tokens (user_id, name, token_hash, token_prefix) values ($1, 'outsider', $2, $3)",
      [rows[0].user_id, sha256(outsider), outsider.slice(0, 8)],
    );
  });
  afterAll(() => server.stop());

  const snippetRows = () =>
    server.controlSql("select name, project_ref, content from platform.snippets order by name");

  it("saves a snippet that the spec's endpoints list and return, and deletes it", async () => {
    const saved = await mgmt(server, "POST", "/v1/snippets", {
      body: { name: "Top authors", project_ref: server.ref, sql: "select 1 as one" },
    });
    expect(saved.status).toBe(201);
    expect(saved.body).toMatchObject({
      name: "Top authors",
      type: "sql",
      content: { sql: "select 1 as one" },
    });
    expect((await snippetRows()).rows).toEqual([
      {
        name: "Top authors",
        project_ref: server.ref,
        content: { sql: "select 1 as one", favorite: false, schema_version: "1.0" },
      },
    ]);

    const list = await mgmt(server, "GET", `/v1/snippets?project_ref=${server.ref}`);
    expect(list.body.data.map((s: { name: string }) => s.name)).toEqual(["Top authors"]);
    const one = await mgmt(server, "GET", `/v1/snippets/${saved.body.id}`);
    expect(one.body.content.sql).toBe("select 1 as one");
    // Another user sees none of it, and cannot delete it.
    expect((await mgmt(server, "GET", "/v1/snippets", { token: outsider })).body.data).toEqual([]);
    expect((await mgmt(server, "GET", `/v1/snippets/${saved.body.id}`, { token: outsider })).status).toBe(
      404,
    );
    expect((await mgmt(server, "DELETE", `/v1/snippets/${saved.body.id}`, { token: outsider })).status).toBe(
      404,
    );
    expect((await snippetRows()).rows).toHaveLength(1);

    expect((await mgmt(server, "DELETE", `/v1/snippets/${saved.body.id}`)).status).toBe(200);
    expect((await snippetRows()).rows).toHaveLength(0);
  });

  it("refuses a snippet on a project the caller is not a member of, or a malformed one, writing nothing", async () => {
    for (const [token, body] of [
      [outsider, { name: "peek", project_ref: server.ref, sql: "select 1" }],
      [server.managementToken, { name: "x", project_ref: "abcdefghijabcdefghij", sql: "select 1" }],
    ] as const) {
      const res = await mgmt(server, "POST", "/v1/snippets", { token, body });
      expect(res.status).toBe(404);
      expect(res.body.message).toMatch(/Project .* not found/);
    }
    for (const body of [
      { name: "", sql: "select 1" },
      { name: "no sql" },
      { name: "bad ref", project_ref: "../x", sql: "select 1" },
      { name: "x".repeat(300), sql: "select 1" },
    ]) {
      const res = await mgmt(server, "POST", "/v1/snippets", { body });
      expect(res.status).toBe(400);
      expect(typeof res.body.message).toBe("string");
    }
    expect((await snippetRows()).rows).toHaveLength(0);
    // A snippet of no project is the caller's own.
    expect(
      (await mgmt(server, "POST", "/v1/snippets", { body: { name: "scratch", sql: "select 2" } })).status,
    ).toBe(201);
    expect((await mgmt(server, "GET", "/v1/snippets", { token: outsider })).body.data).toEqual([]);
  });

  it("answers an error in the SQL with its SQLSTATE and position", async () => {
    const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, {
      body: { query: "select 1;\nselec 2" },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ message: expect.stringMatching(/syntax error/), code: "42601", position: 11 });
    const noPosition = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, {
      body: { query: "select 1/0" },
    });
    expect(noPosition.body).toEqual({ message: "division by zero", code: "22012" });
  });
});
