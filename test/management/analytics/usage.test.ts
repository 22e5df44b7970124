import { startTestServer, type TestServer } from "../../helpers/server";

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
