import { createHmac } from "node:crypto";
import { newAccessToken, sha256 } from "../../src/platform/ids";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";

/**
 * GET /v2/projects/{ref}/config (the CLI's `config pull/diff/push`): each section is its family's v1 answer to
 * the same caller, read in process, so a caller a v1 route refuses is refused the same way and the document
 * costs one request of the caller's rate limit.
 */

jest.setTimeout(120_000);

/** Stores a token of the bootstrap admin with the given permissions or OAuth scopes. */
async function storeToken(
  server: TestServer,
  opts: { permissions?: string[]; scopes?: string[] },
): Promise<string> {
  const token = newAccessToken();
  await server.controlSql(
    `insert into platform.access_tokens (user_id, name, token_hash, token_prefix, permissions, scopes)
     select id, 'test', $1, $2, $3, $4 from platform.users where email = 'admin@strata.local'`,
    [sha256(token), token.slice(0, 8), opts.permissions ?? null, opts.scopes ?? null],
  );
  return token;
}

const SECTION_READS = [
  "project_admin_read",
  "database_ssl_config_read",
  "database_network_restrictions_read",
  "database_config_read",
  "database_read",
  "auth_config_read",
  "data_api_config_read",
  "realtime_config_read",
  "storage_config_read",
];

describe("GET /v2/projects/{ref}/config", () => {
  let server: TestServer;
  let ref: string;
  const v2 = (token?: string) => mgmt(server, "GET", `/v2/projects/${ref}/config`, { token });

  beforeAll(async () => {
    server = await startTestServer();
    ref = server.ref;
  });
  afterAll(() => server.stop());

  it("answers each section as its v1 GET does, auth secrets as their HMAC keyed by the ref", async () => {
    await mgmt(server, "PATCH", `/v1/projects/${ref}/config/auth`, {
      body: { site_url: "https://v2.example.com", smtp_pass: "smtp-secret-of-the-test" },
    });
    await mgmt(server, "PATCH", `/v1/projects/${ref}/postgrest`, { body: { max_rows: 321 } });
    await mgmt(server, "PATCH", `/v1/projects/${ref}/config/realtime`, {
      body: { max_concurrent_users: 77 },
    });
    await mgmt(server, "PATCH", `/v1/projects/${ref}/config/storage`, { body: { fileSizeLimit: 12345 } });

    const res = await v2(await storeToken(server, { permissions: SECTION_READS }));
    expect(res.status).toBe(200);
    const { database, pooler, auth, api, realtime, storage } = res.body.data.attributes;
    const v1 = async (path: string) => (await mgmt(server, "GET", `/v1/projects/${ref}${path}`)).body;

    const detail = await v1("");
    expect(database.major_version).toBe(Number(detail.database.version.split(".")[0]));
    expect(database.ssl_enforced).toBe((await v1("/ssl-enforcement")).currentConfig.database);
    expect(database.network_restrictions.status).toBe((await v1("/network-restrictions")).status);
    expect(database.postgres_settings.statement_timeout).toBe(
      (await v1("/config/database/postgres")).statement_timeout,
    );
    expect(pooler.default_pool_size).toBe((await v1("/config/database/pgbouncer")).default_pool_size);
    expect(auth.site_url).toBe("https://v2.example.com");
    expect(auth.smtp_pass).toBe(createHmac("sha256", ref).update("smtp-secret-of-the-test").digest("hex"));
    expect(api.max_rows).toBe(321);
    expect(realtime).toMatchObject({ ...(await v1("/config/realtime")), max_concurrent_users: 77 });
    expect(storage.file_size_limit).toBe(12345);
    // The stored documents, read another way: what the sections answered is what is kept.
    const { rows } = await server.controlSql(
      "select kind, value from platform.project_settings where project_ref = $1 and kind in ('realtime', 'storage')",
      [ref],
    );
    const stored = Object.fromEntries(rows.map((r) => [r.kind, r.value]));
    expect(stored.realtime.max_concurrent_users).toBe(realtime.max_concurrent_users);
    expect(stored.storage.fileSizeLimit).toBe(storage.file_size_limit);
  });

  it("refuses a caller one section's v1 GET refuses, naming that GET, as it refuses", async () => {
    for (const missing of SECTION_READS.slice(1)) {
      const token = await storeToken(server, { permissions: SECTION_READS.filter((p) => p !== missing) });
      const res = await v2(token);
      expect(res.status).toBe(403);
      expect(res.body.message).toMatch(new RegExp(`^/v1/projects/${ref}/.*: Forbidden: .*${missing}$`));
      const path = res.body.message.split(":")[0];
      const own = await mgmt(server, "GET", path, { token });
      expect(own.status).toBe(403);
      expect(res.body.message).toBe(`${path}: ${own.body.message}`);
    }
    // OAuth tokens: realtime's and storage's config GETs have no scope, so no OAuth token reads them.
    const oauth = await storeToken(server, {
      scopes: ["projects:read", "database:read", "auth:read", "rest:read", "storage:read"],
    });
    const res = await v2(oauth);
    expect(res.status).toBe(403);
    expect(res.body.message).toBe(
      `/v1/projects/${ref}/config/realtime: Forbidden: this endpoint needs the OAuth scope (none available)`,
    );
  });

  it("costs the caller one request of the Management API's rate limit, not one per section", async () => {
    const remaining = (r: { headers: Headers }) => Number(r.headers.get("x-ratelimit-remaining"));
    const first = await v2();
    const second = await v2();
    expect(second.status).toBe(200);
    // A window that restarts between the two only raises the count.
    expect(remaining(first) - remaining(second)).toBeLessThanOrEqual(1);
  });
});
