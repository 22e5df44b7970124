import { execFile } from "node:child_process";

import path from "node:path";
import { promisify } from "node:util";
import { newAccessToken, sha256 } from "../../src/platform/ids";
import { startTestServer, type TestServer, TEST_KEK } from "../helpers/server";
import { mgmt } from "./client";
import { testTempDir } from "../helpers/tempDir";

/** Stores a token for the bootstrap admin the way the CLI and the OAuth server do. */
async function storeToken(
  server: TestServer,
  opts: { permissions?: string[]; scopes?: string[]; expired?: boolean },
): Promise<string> {
  const token = newAccessToken();
  await server.controlSql(
    `insert into platform.access_tokens (user_id, name, token_hash, token_prefix, permissions, scopes, expires_at)
     select id, 'test', $1, $2, $3, $4, case when $5 then now() - interval '1 minute' end
       from platform.users where email = 'admin@strata.local'`,
    [sha256(token), token.slice(0, 8), opts.permissions ?? null, opts.scopes ?? null, opts.expired ?? false],
  );
  return token;
}

describe("Management API access", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("answers 401 with a message for a missing, unknown or expired token", async () => {
    const expired = await storeToken(server, { expired: true });
    for (const token of [null, "sbp_not-a-token", expired]) {
      const res = await mgmt(server, "GET", "/v1/projects", { token });
      expect(res.status).toBe(401);
      expect(typeof res.body.message).toBe("string");
    }
  });

  it("lets a fine-grained token do what its permissions allow, and nothing else", async () => {
    const token = await storeToken(server, { permissions: ["projects_read", "project_admin_read"] });
    expect((await mgmt(server, "GET", "/v1/projects", { token })).status).toBe(200);
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}`, { token })).status).toBe(200);
    const refused = await mgmt(server, "PATCH", `/v1/projects/${server.ref}`, { token, body: { name: "x" } });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/project_admin_write/);
    expect((await mgmt(server, "POST", "/v1/organizations", { token, body: { name: "nope" } })).status).toBe(
      403,
    );
    expect(
      (await server.controlSql("select 1 from platform.organizations where name = 'nope'")).rowCount,
    ).toBe(0);
  });

  it("answers the JWT secret only to callers who may read the project's keys", async () => {
    const path = `/v1/projects/${server.ref}/postgrest`;
    const full = await mgmt(server, "GET", path);
    expect(full.body.jwt_secret).toEqual(expect.any(String));
    const configReader = await storeToken(server, { permissions: ["data_api_config_read"] });
    const partial = await mgmt(server, "GET", path, { token: configReader });
    expect(partial.status).toBe(200);
    expect(partial.body).toHaveProperty("db_schema");
    expect(partial.body).not.toHaveProperty("jwt_secret");
    const restScope = await storeToken(server, { scopes: ["rest:read"] });
    expect((await mgmt(server, "GET", path, { token: restScope })).body).not.toHaveProperty("jwt_secret");
    const withSecrets = await storeToken(server, { scopes: ["rest:read", "secrets:read"] });
    expect((await mgmt(server, "GET", path, { token: withSecrets })).body.jwt_secret).toBe(
      full.body.jwt_secret,
    );
  });

  it("checks OAuth scopes for OAuth tokens", async () => {
    const token = await storeToken(server, { scopes: ["organizations:read"] });
    expect((await mgmt(server, "GET", "/v1/organizations", { token })).status).toBe(200);
    const refused = await mgmt(server, "GET", "/v1/projects", { token });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/projects:read/);
    // The profile lists no scope, so a scope-only token cannot read it.
    expect((await mgmt(server, "GET", "/v1/profile", { token })).status).toBe(403);
  });

  it("gives a personal token its user's privileges: organization membership and role", async () => {
    const { rows } = await server.controlSql(
      `with u as (insert into platform.users (email, username) values ('reader@example.test', 'reader') returning id)
       insert into platform.organization_members (organization_id, user_id, role_name)
       select o.id, u.id, 'Read-only' from platform.organizations o, u where o.slug = 'default-org'
       returning user_id`,
    );
    const token = newAccessToken();
    await server.controlSql(
      "insert into platform.access_tokens (user_id, name, token_hash, token_prefix) values ($1, 'reader', $2, $3)",
      [rows[0].user_id, sha256(token), token.slice(0, 8)],
    );
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}`, { token })).status).toBe(200);
    expect((await mgmt(server, "GET", "/v1/organizations/default-org/members", { token })).status).toBe(200);
    const rename = await mgmt(server, "PATCH", `/v1/projects/${server.ref}`, {
      token,
      body: { name: "mine" },
    });
    expect(rename.status).toBe(403);
    expect(rename.body.message).toMatch(/Read-only/);
    const create = await mgmt(server, "POST", "/v1/projects", {
      token,
      body: { name: "mine", organization_slug: "default-org", db_pass: "pw" },
    });
    expect(create.status).toBe(403);
    // Another organization's resources do not exist for this user, whatever the path under them.
    const other = await mgmt(server, "POST", "/v1/organizations", { body: { name: "Admins Only" } });
    expect((await mgmt(server, "GET", `/v1/organizations/${other.body.slug}`, { token })).status).toBe(404);
    expect(
      (await mgmt(server, "GET", `/v1/organizations/${other.body.slug}/anything`, { token })).status,
    ).toBe(404);
    expect((await mgmt(server, "GET", "/v1/organizations", { token })).body.map((o: any) => o.slug)).toEqual([
      "default-org",
    ]);
  });

  it("refuses every spelling of a path to a project or organization the caller is not a member of", async () => {
    const { rows } = await server.controlSql(
      `with u as (insert into platform.users (email, username) values ('outsider@example.test', 'outsider') returning id),
            o as (insert into platform.organizations (name, slug) values ('Outside', 'outside-org') returning id)
       insert into platform.organization_members (organization_id, user_id, role_name)
       select o.id, u.id, 'Owner' from o, u returning user_id`,
    );
    const token = newAccessToken();
    await server.controlSql(
      "insert into platform.access_tokens (user_id, name, token_hash, token_prefix) values ($1, 'outsider', $2, $3)",
      [rows[0].user_id, sha256(token), token.slice(0, 8)],
    );
    const ref = server.ref;
    for (const path of [
      `/v1/projects/${ref}/api-keys`,
      `/v1/PROJECTS/${ref}/api-keys`,
      `/v1/Projects/${ref}/secrets`,
      `/V1/projects/${ref}/api-keys`,
      `/v1/projects/${ref}/API-KEYS`,
      `/v1/projects/${ref.toUpperCase()}/api-keys`,
      `/v1/projects/${encodeURIComponent(ref).replace(/a/g, "%61")}/api-keys`,
      "/v1/ORGANIZATIONS/default-org/members",
    ]) {
      const res = await mgmt(server, "GET", path, { token });
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
    }
    // The member itself gets the spec's spelling only.
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/api-keys`)).status).toBe(200);
    expect((await mgmt(server, "GET", `/v1/PROJECTS/${ref}/api-keys`)).status).toBe(404);
  });

  it("creates tokens from the command line, personal or fine-grained", async () => {
    const run = (args: string[]) =>
      promisify(execFile)(
        path.resolve("node_modules/.bin/node"),
        ["--import", "tsx", "src/cli/main.ts", ...args],
        {
          env: {
            ...process.env,
            DATABASE_URL: server.dbUrl,
            STRATA_DATA_DIR: testTempDir("strata-cli-"),
            AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
            STRATA_KEK: TEST_KEK,
          },
        },
      );
    const created = JSON.parse(
      (await run(["token", "create", "--permissions", "organizations_read", "--json"])).stdout,
    );
    expect(created.permissions).toEqual(["organizations_read"]);
    expect(created.token).toMatch(/^sbp_[0-9a-f]{40}$/);
    expect((await mgmt(server, "GET", "/v1/organizations", { token: created.token })).status).toBe(200);
    expect((await mgmt(server, "GET", "/v1/projects", { token: created.token })).status).toBe(403);

    await expect(run(["token", "create", "--permissions", "make_coffee"])).rejects.toMatchObject({
      stderr: expect.stringMatching(/Unknown permission\(s\): make_coffee/),
    });
  }, 60_000);

  it("serves its OpenAPI document from the routes' own schemas", async () => {
    const res = await fetch(`${server.url}/v1/openapi.json`);
    expect(res.status).toBe(200);
    const doc: any = await res.json();
    const create = doc.paths["/v1/projects"].post;
    expect(create.requestBody.content["application/json"].schema.required).toEqual(
      expect.arrayContaining(["name", "organization_slug", "db_pass"]),
    );
    expect(create.responses["201"]).toBeDefined();
    expect(create["x-permission"]).toBe("organization_projects_create");
    expect(doc.paths["/v1/projects/{ref}/health"].get.parameters.map((p: any) => p.name)).toEqual([
      "ref",
      "services",
      "timeout_ms",
    ]);
  });
});
