import pg from "pg";
import { startTestServer, type TestServer } from "../helpers/server";

describe("Management API configuration that acts on the database", () => {
  let server: TestServer;
  let base: string;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${base}${path}`, {
      method,
      headers: { Authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
  });
  afterAll(() => server.stop());

  it("applies statement_timeout to new sessions of the project database", async () => {
    const put = await call("PUT", "/config/database/postgres", { statement_timeout: "1500ms" });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ statement_timeout: "1500ms" });
    // A session opened after the change starts with the new value (the helper's pool may hold older ones).
    const fresh = new pg.Client({ connectionString: server.dbUrl });
    await fresh.connect();
    try {
      const { rows } = await fresh.query("select current_setting('statement_timeout') as value");
      expect(rows[0].value).toBe("1500ms");
    } finally {
      await fresh.end();
    }
    expect((await call("PUT", "/config/database/postgres", { shared_buffers: "1GB" })).status).toBe(400);
  });

  it("reports real lints: an unindexed foreign key and a table without row level security", async () => {
    await server.sql(
      "create table owners (id int primary key); create table cars (id int primary key, owner_id int references owners)",
    );
    const perf = await call("GET", "/advisors/performance");
    expect(perf.body.lints).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: "unindexed_foreign_keys",
          metadata: expect.objectContaining({ name: "cars" }),
        }),
      ]),
    );
    const security = await call("GET", "/advisors/security");
    expect(security.body.lints.map((l: { cache_key: string }) => l.cache_key)).toEqual(
      expect.arrayContaining(["rls_disabled_in_public_public_cars", "rls_disabled_in_public_public_owners"]),
    );
    await server.sql("create index on cars (owner_id)");
    expect((await call("GET", "/advisors/performance")).body.lints).toEqual([]);
  });

  it("stores network restrictions and rejects malformed CIDRs", async () => {
    const applied = await call("POST", "/network-restrictions/apply", {
      dbAllowedCidrs: ["10.0.0.0/8"],
      dbAllowedCidrsV6: [],
    });
    expect(applied.status).toBe(201);
    expect((await call("GET", "/network-restrictions")).body.config).toEqual({
      dbAllowedCidrs: ["10.0.0.0/8"],
      dbAllowedCidrsV6: [],
    });
    expect(
      (await call("POST", "/network-restrictions/apply", { dbAllowedCidrs: ["10.0.0.0/99"] })).status,
    ).toBe(400);
  });

  it("refuses log queries over more than 24 hours", async () => {
    const end = new Date();
    const start = new Date(end.getTime() - 48 * 3600e3);
    const res = await call(
      "GET",
      `/analytics/endpoints/logs?iso_timestamp_start=${start.toISOString()}&iso_timestamp_end=${end.toISOString()}`,
    );
    expect(res.status).toBe(400);
  });
});

describe("Management API usage analytics", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("counts the requests each project's data interfaces served", async () => {
    for (let i = 0; i < 3; i++) {
      await fetch(`${server.url}/rest/v1/`, { headers: { apikey: server.anonKey } });
    }
    const res = await fetch(
      `${server.url}/v1/projects/${server.ref}/analytics/endpoints/usage.api-requests-count`,
      {
        headers: { Authorization: `Bearer ${server.managementToken}` },
      },
    );
    expect(((await res.json()) as any).result).toEqual([{ count: 3 }]);
    const counts = await fetch(
      `${server.url}/v1/projects/${server.ref}/analytics/endpoints/usage.api-counts?interval=1hr`,
      {
        headers: { Authorization: `Bearer ${server.managementToken}` },
      },
    );
    const rows = ((await counts.json()) as any).result;
    expect(rows.reduce((n: number, r: any) => n + r.total_rest_requests, 0)).toBe(3);
  });
});
