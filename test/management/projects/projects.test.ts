import pg from "pg";
import { mintLegacyKey } from "../../../src/auth/legacyKeys";
import { withDatabase } from "../../../src/db/urls";
import { adminQuery } from "../../helpers/db";
import { startTestServer, type TestServer } from "../../helpers/server";
import { atProjectHost, mgmt, waitForStatus } from "../client";

/** Reads a table through the project's GraphQL endpoint (pg_graphql's `<table>Collection`). */
async function readTitles(
  server: TestServer,
  ref: string,
  apikey: string,
): Promise<{ status: number; body: any; titles?: string[] }> {
  const query = "{ notesCollection { edges { node { title } } } }";
  const res = await atProjectHost(server, ref, "/graphql/v1", { apikey, body: { query } });
  const titles = res.body?.data?.notesCollection?.edges.map((e: any) => e.node.title);
  return { status: res.status, body: res.body, titles };
}

describe("projects as real databases", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    // Project databases live beside the test database on the cluster: delete them as a user would.
    const { rows } = await server.controlSql("select ref from platform.projects where not is_default");
    for (const { ref } of rows) await mgmt(server, "DELETE", `/v1/projects/${ref}`);
    await server.stop();
  });

  it("creates, serves, pauses, restores and deletes a project of its own", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: {
        name: "shop",
        organization_slug: "default-org",
        db_pass: "a-strong-password",
        region: "us-east-1",
      },
    });
    expect(created.status).toBe(201);
    const ref: string = created.body.ref;
    expect(ref).toMatch(/^[a-z]{20}$/);
    expect(created.body).toMatchObject({ name: "shop", organization_slug: "default-org", region: "local" });
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");

    const { rows } = await server.controlSql(
      "select database_name, legacy_keys_iat from platform.projects where ref = $1",
      [ref],
    );
    // The JWT secret is stored sealed: the Management API is where it is read.
    const jwtSecret = (await mgmt(server, "GET", `/v1/projects/${ref}/postgrest`)).body.jwt_secret;
    const projectDbUrl = withDatabase(server.dbUrl, rows[0].database_name);
    await adminQuery(
      "create table public.notes (id serial primary key, title text not null); insert into public.notes (title) values ('first'), ('second')",
      [],
      projectDbUrl,
    );
    const anonKey = await mintLegacyKey(jwtSecret, "anon", Number(rows[0].legacy_keys_iat));
    expect(anonKey).not.toBe(server.anonKey);

    const read = await readTitles(server, ref, anonKey);
    expect(read.status).toBe(200);
    expect(read.titles?.sort()).toEqual(["first", "second"]);

    // Keys of one project never open another.
    expect((await readTitles(server, ref, server.anonKey)).status).toBe(401);
    const ownKeyAtDefault = await fetch(`${server.url}/graphql/v1`, {
      method: "POST",
      headers: { "content-type": "application/json", apikey: anonKey },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    expect(ownKeyAtDefault.status).toBe(401);

    expect((await mgmt(server, "POST", `/v1/projects/${ref}/pause`)).status).toBe(200);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).body.status).toBe("INACTIVE");
    const paused = await readTitles(server, ref, anonKey);
    expect(paused.status).toBe(503);
    expect(typeof paused.body.message).toBe("string");
    // The gate's refusal in each API's own format: the auth server's for /auth/v1.
    const pausedAuth = await atProjectHost(server, ref, "/auth/v1/settings", { apikey: anonKey });
    expect(pausedAuth).toMatchObject({ status: 503, body: { code: 503, error_code: "project_paused" } });
    await expect(adminQuery("select 1", [], projectDbUrl)).rejects.toThrow(
      /not currently accepting connections/,
    );
    // Nothing to cancel, nothing to restart, nothing to pause twice while it sleeps.
    expect((await mgmt(server, "POST", `/v1/projects/${ref}/restore/cancel`)).status).toBe(400);
    expect((await mgmt(server, "POST", `/v1/projects/${ref}/restart`)).status).toBe(400);
    expect((await mgmt(server, "POST", `/v1/projects/${ref}/pause`)).status).toBe(400);

    expect((await mgmt(server, "POST", `/v1/projects/${ref}/restore`)).status).toBe(200);
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");
    expect((await readTitles(server, ref, anonKey)).titles?.sort()).toEqual(["first", "second"]);

    const deleted = await mgmt(server, "DELETE", `/v1/projects/${ref}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ id: expect.any(Number), ref, name: "shop" });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).status).toBe(404);
    const exists = await adminQuery("select 1 from pg_database where datname = $1", [rows[0].database_name]);
    expect(exists.rowCount).toBe(0);
    expect((await readTitles(server, ref, anonKey)).status).toBe(404);
  });

  it("lists, searches, sorts, filters and renames projects of an organization", async () => {
    const org = await mgmt(server, "POST", "/v1/organizations", { body: { name: "Listing Org" } });
    const slug = org.body.slug;
    const refs: string[] = [];
    for (const name of ["beta", "alpha", "gamma"]) {
      const res = await mgmt(server, "POST", "/v1/projects", {
        body: { name, organization_slug: slug, db_pass: "pw" },
      });
      expect(res.status).toBe(201);
      refs.push(res.body.ref);
    }
    await Promise.all(refs.map((ref) => waitForStatus(server, ref, "ACTIVE_HEALTHY")));

    const page = await mgmt(server, "GET", `/v1/organizations/${slug}/projects?offset=1&limit=1`);
    expect(page.status).toBe(200);
    expect(page.body.pagination).toEqual({ count: 3, limit: 1, offset: 1 });
    expect(page.body.projects.map((p: any) => p.name)).toEqual(["beta"]);
    expect(page.body.projects[0]).toMatchObject({ is_branch: false, status: "ACTIVE_HEALTHY" });

    const desc = await mgmt(server, "GET", `/v1/organizations/${slug}/projects?sort=name_desc`);
    expect(desc.body.projects.map((p: any) => p.name)).toEqual(["gamma", "beta", "alpha"]);
    const search = await mgmt(server, "GET", `/v1/organizations/${slug}/projects?search=amm`);
    expect(search.body.projects.map((p: any) => p.name)).toEqual(["gamma"]);
    const inactive = await mgmt(server, "GET", `/v1/organizations/${slug}/projects?statuses=INACTIVE`);
    expect(inactive.body.pagination.count).toBe(0);
    expect((await mgmt(server, "GET", `/v1/organizations/${slug}/projects?sort=sideways`)).status).toBe(400);

    const renamed = await mgmt(server, "PATCH", `/v1/projects/${refs[0]}`, { body: { name: "beta-2" } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ id: expect.any(Number), ref: refs[0], name: "beta-2" });
    expect((await mgmt(server, "GET", `/v1/projects/${refs[0]}`)).body.name).toBe("beta-2");

    const all = await mgmt(server, "GET", "/v1/projects");
    expect(all.body.map((p: any) => p.ref)).toEqual(expect.arrayContaining([server.ref, ...refs]));
    expect(all.body[0].database).toMatchObject({ sql_engine: "postgres", release_channel: "ga" });
  });

  it("answers unknown refs with 404 and malformed bodies with 400 naming the field", async () => {
    const unknown = await mgmt(server, "GET", "/v1/projects/zzzzzzzzzzzzzzzzzzzz");
    expect(unknown.status).toBe(404);
    expect(unknown.body.message).toMatch(/not found/);
    expect((await mgmt(server, "POST", "/v1/projects/zzzzzzzzzzzzzzzzzzzz/pause")).status).toBe(404);

    const before = await server.controlSql("select count(*)::int as n from platform.projects");
    const missing = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "x", organization_slug: "default-org" },
    });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/db_pass/);
    const wrongType = await mgmt(server, "PATCH", `/v1/projects/${server.ref}`, { body: { name: 42 } });
    expect(wrongType.status).toBe(400);
    expect(wrongType.body.message).toMatch(/name/);
    const noOrg = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "x", organization_slug: "no-such-org", db_pass: "pw" },
    });
    expect(noOrg.status).toBe(404);
    const after = await server.controlSql("select count(*)::int as n from platform.projects");
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it("checks a project's services for real and lists regions and restore versions", async () => {
    const health = await mgmt(
      server,
      "GET",
      `/v1/projects/${server.ref}/health?services=db&services=graphql&services=storage`,
    );
    expect(health.status).toBe(200);
    expect(health.body).toEqual([
      { name: "db", healthy: true, status: "ACTIVE_HEALTHY" },
      { name: "graphql", healthy: true, status: "ACTIVE_HEALTHY" },
      { name: "storage", healthy: true, status: "ACTIVE_HEALTHY" },
    ]);
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}/health`)).status).toBe(400);

    const regions = await mgmt(server, "GET", "/v1/projects/available-regions?organization_slug=default-org");
    expect(regions.status).toBe(200);
    expect(regions.body.all.specific).toEqual([expect.objectContaining({ code: "local" })]);

    const versions = await mgmt(server, "GET", `/v1/projects/${server.ref}/restore`);
    expect(versions.body.available_versions[0].version).toMatch(/^\d+/);
  });

  it("keeps the default project, which is the main database, from being paused or deleted", async () => {
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/pause`)).status).toBe(400);
    expect((await mgmt(server, "DELETE", `/v1/projects/${server.ref}`)).status).toBe(400);
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/restore/cancel`)).status).toBe(400);
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/restart`)).status).toBe(200);
    const client = new pg.Client({ connectionString: server.dbUrl });
    await client.connect();
    await client.end();
  });

  it("places a project on the cluster of the requested region", async () => {
    // A second cluster entry (here on the same server) as an operator would register it.
    await server.controlSql(
      `insert into platform.clusters (id, region, admin_url, authenticator_password)
       select 'second', 'eu-west', admin_url, authenticator_password from platform.clusters where id = 'local'`,
    );
    const regions = await mgmt(server, "GET", "/v1/projects/available-regions?organization_slug=default-org");
    expect(regions.body.all.specific.map((r: any) => r.code)).toEqual(["eu-west", "local"]);

    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "european", organization_slug: "default-org", db_pass: "pw", region: "eu-west" },
    });
    expect(created.body.region).toBe("eu-west");
    await waitForStatus(server, created.body.ref, "ACTIVE_HEALTHY");
    const { rows } = await server.controlSql("select cluster_id from platform.projects where ref = $1", [
      created.body.ref,
    ]);
    expect(rows[0].cluster_id).toBe("second");
    const health = await mgmt(server, "GET", `/v1/projects/${created.body.ref}/health?services=db`);
    expect(health.body[0]).toMatchObject({ healthy: true });
  });
});
