import { startTestServer, type TestServer } from "../helpers/server";
import { atProjectHost, mgmt, waitForStatus } from "../management/client";

/**
 * One project's load does not take another project's connections: each project has its own pools, so a
 * project whose every connection is busy leaves its neighbour answering.
 */
describe("Connections per project", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("serves a second project while every connection of the first is busy", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "neighbour", organization_slug: "default-org", db_pass: "neighbour-password" },
    });
    const other = created.body.ref as string;
    await waitForStatus(server, other, "ACTIVE_HEALTHY");
    const keys = await mgmt(server, "GET", `/v1/projects/${other}/api-keys?reveal=true`);
    const otherAnon = keys.body.find((k: { name: string }) => k.name === "anon").api_key as string;

    await server.sql(`
      create function public.slow() returns int language sql volatile as 'select 1 from pg_sleep(2)';
      grant execute on function public.slow() to anon;
    `);
    // Twice as many slow calls as the busy project has connections.
    let busyFinished = 0;
    let busyRunning = 0;
    const busy = Array.from({ length: 20 }, async () => {
      const res = await fetch(`${server.url}/rest/v1/rpc/slow`, {
        method: "POST",
        headers: { apikey: server.anonKey, "content-type": "application/json" },
        body: "{}",
      });
      busyFinished++;
      return res.status;
    });
    // Wait until the busy project's connections are all taken by the sleeps.
    for (let i = 0; i < 50 && busyRunning < 10; i++) {
      await new Promise((r) => setTimeout(r, 100));
      busyRunning = (
        await server.sql(
          "select count(*)::int as n from pg_stat_activity where wait_event = 'PgSleep' and datname = current_database()",
        )
      ).rows[0].n;
    }
    expect(busyRunning).toBeGreaterThanOrEqual(10);

    const neighbour = await atProjectHost(server, other, "/rest/v1/", { apikey: otherAnon });
    expect(neighbour.status).toBe(200);
    // The neighbour answered while the busy project's first sleeps were still running.
    expect(busyFinished).toBe(0);
    expect(await Promise.all(busy)).toEqual(Array(20).fill(200));
  }, 60_000);
});
