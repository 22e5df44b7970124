import { decryptSecret } from "../../../src/platform/secrets";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

describe("Management API: secrets", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
  });
  afterAll(() => server.stop());

  it("keeps secrets encrypted, lists digests only, and re-encrypts them when the root key changes", async () => {
    expect(
      (
        await mgmt(server, "POST", `${base}/secrets`, {
          body: [{ name: "STRIPE_KEY", value: "sk_live_123" }],
        })
      ).status,
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
    expect((await mgmt(server, "PUT", `${base}/sodium`, { body: { root_key: newKey } })).body).toEqual({
      root_key: newKey,
    });
    const after = await server.controlSql(
      "select ciphertext from platform.project_secrets where name = 'STRIPE_KEY'",
    );
    expect(decryptSecret(newKey, after.rows[0].ciphertext)).toBe("sk_live_123");
    expect(
      (await mgmt(server, "POST", `${base}/secrets`, { body: [{ name: "SUPABASE_URL", value: "x" }] }))
        .status,
    ).toBe(400);
    expect((await mgmt(server, "DELETE", `${base}/secrets`, { body: ["STRIPE_KEY"] })).status).toBe(200);
    expect((await mgmt(server, "GET", `${base}/secrets`)).body).toEqual([]);
  });
});
