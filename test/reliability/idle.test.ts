import { startTestServer, type TestServer } from "../helpers/server";
import { atProjectHost, mgmt, waitForStatus } from "../management/client";

/** A project nobody uses gives its connections back to the cluster, and opens again on the next request. */
describe("Idle projects", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ PROJECT_IDLE_MS: "1000" });
  });
  afterAll(() => server.stop());

  const connectionsTo = async (database: string) =>
    (await server.sql("select count(*)::int as n from pg_stat_activity where datname = $1", [database]))
      .rows[0].n as number;

  it("closes an unused project's pools and DDL watch, then serves it again", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "sleepy", organization_slug: "default-org", db_pass: "sleepy-password" },
    });
    const ref = created.body.ref as string;
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");
    const database = (
      await server.controlSql("select database_name from platform.projects where ref = $1", [ref])
    ).rows[0].database_name as string;
    const keys = await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`);
    const anon = keys.body.find((k: { name: string }) => k.name === "anon").api_key as string;

    expect((await atProjectHost(server, ref, "/rest/v1/", { apikey: anon })).status).toBe(200);
    expect(await connectionsTo(database)).toBeGreaterThan(0);

    // Idle for a second, then retired after the grace period in-flight requests get.
    let open = await connectionsTo(database);
    for (let i = 0; i < 60 && open > 0; i++) {
      await new Promise((r) => setTimeout(r, 500));
      open = await connectionsTo(database);
    }
    expect(open).toBe(0);

    expect((await atProjectHost(server, ref, "/rest/v1/", { apikey: anon })).status).toBe(200);
    expect(await connectionsTo(database)).toBeGreaterThan(0);
  });
});
