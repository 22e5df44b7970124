import { decryptSecret } from "../../src/platform/secrets";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "./api";

describe("Management API: REST-layer config and secrets", () => {
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
      db_plan_enabled: false,
      jwt_secret: server.jwtSecret,
    });
    const patched = await mgmt(server, "PATCH", `${base}/restapi`, { max_rows: 3 });
    expect(patched.body).toEqual({
      db_schema: "public",
      db_extra_search_path: "public, extensions",
      max_rows: 3,
      db_pool: null,
      db_plan_enabled: false,
    });
    const rows = await fetch(`${server.url}/rest/v1/numbers?order=n`, {
      headers: { apikey: server.anonKey },
    });
    expect(await rows.json()).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect((await mgmt(server, "GET", `${base}/postgrest`)).body.max_rows).toBe(3);
    expect((await mgmt(server, "PATCH", `${base}/restapi`, { max_rows: "lots" })).status).toBe(400);
  });

  it("keeps secrets encrypted, lists digests only, and re-encrypts them when the root key changes", async () => {
    expect(
      (await mgmt(server, "POST", `${base}/secrets`, [{ name: "STRIPE_KEY", value: "sk_live_123" }])).status,
    ).toBe(201);
    const list = await mgmt(server, "GET", `${base}/secrets`);
    expect(list.body).toEqual([
      { name: "STRIPE_KEY", value: expect.stringMatching(/^[0-9a-f]{64}$/), updated_at: expect.any(String) },
    ]);
    const stored = await server.controlSql(
      "select ciphertext from platform.project_secrets where name = 'STRIPE_KEY'",
    );
    expect(stored.rows[0].ciphertext).not.toContain("sk_live_123");
    const newKey = "a-brand-new-root-key-of-sufficient-length";
    expect((await mgmt(server, "PUT", `${base}/sodium`, { root_key: newKey })).body).toEqual({
      root_key: newKey,
    });
    const after = await server.controlSql(
      "select ciphertext from platform.project_secrets where name = 'STRIPE_KEY'",
    );
    expect(decryptSecret(newKey, after.rows[0].ciphertext)).toBe("sk_live_123");
    expect(
      (await mgmt(server, "POST", `${base}/secrets`, [{ name: "SUPABASE_URL", value: "x" }])).status,
    ).toBe(400);
    expect((await mgmt(server, "DELETE", `${base}/secrets`, ["STRIPE_KEY"])).status).toBe(200);
    expect((await mgmt(server, "GET", `${base}/secrets`)).body).toEqual([]);
  });
});
