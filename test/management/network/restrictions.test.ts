import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

describe("Management API: network restrictions on a DATABASE_URL cluster", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
  });
  afterAll(() => server.stop());

  it("stores network restrictions and rejects malformed CIDRs", async () => {
    const applied = await mgmt(server, "POST", `${base}/network-restrictions/apply`, {
      body: { dbAllowedCidrs: ["10.0.0.0/8"], dbAllowedCidrsV6: [] },
    });
    expect(applied.status).toBe(201);
    expect((await mgmt(server, "GET", `${base}/network-restrictions`)).body.config).toEqual({
      dbAllowedCidrs: ["10.0.0.0/8"],
      dbAllowedCidrsV6: [],
    });
    expect(
      (
        await mgmt(server, "POST", `${base}/network-restrictions/apply`, {
          body: { dbAllowedCidrs: ["10.0.0.0/99"] },
        })
      ).status,
    ).toBe(400);
  });
});
