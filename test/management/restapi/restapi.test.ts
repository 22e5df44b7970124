import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

describe("Management API: REST-layer config", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
    await server.sql(
      "create table numbers (n int primary key); insert into numbers select generate_series(1, 10)",
    );
  });
  afterAll(() => server.stop());

  it("caps REST reads at max_rows as soon as the config changes, and hides the secret in PATCH answers", async () => {
    const before = await mgmt(server, "GET", `${base}/restapi`);
    expect(before.body).toEqual({
      db_schema: "public",
      db_extra_search_path: "public, extensions",
      max_rows: 1000,
      db_pool: null,
      db_pool_acquisition_timeout: null,
      db_plan_enabled: false,
      jwt_secret: server.jwtSecret,
    });
    const patched = await mgmt(server, "PATCH", `${base}/restapi`, { body: { max_rows: 3 } });
    expect(patched.body).toEqual({
      db_schema: "public",
      db_extra_search_path: "public, extensions",
      max_rows: 3,
      db_pool: null,
      db_pool_acquisition_timeout: null,
      db_plan_enabled: false,
    });
    const rows = await fetch(`${server.url}/rest/v1/numbers?order=n`, {
      headers: { apikey: server.anonKey },
    });
    expect(await rows.json()).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect((await mgmt(server, "GET", `${base}/postgrest`)).body.max_rows).toBe(3);
    expect((await mgmt(server, "PATCH", `${base}/restapi`, { body: { max_rows: "lots" } })).status).toBe(400);
  });
});
