import { startTestServer, type TestServer } from "../helpers/server";
import { atProjectHost, mgmt, waitForStatus } from "../management/client";

describe("API keys across projects", () => {
  let server: TestServer;
  let otherRef: string;
  beforeAll(async () => {
    server = await startTestServer();
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: {
        name: "other",
        organization_slug: "default-org",
        db_pass: "a-strong-password",
        region: "us-east-1",
      },
    });
    otherRef = created.body.ref;
    await waitForStatus(server, otherRef, "ACTIVE_HEALTHY");
  });
  afterAll(async () => {
    await mgmt(server, "DELETE", `/v1/projects/${otherRef}`);
    await server.stop();
  });

  const newKey = async (ref: string, name: string) =>
    (await mgmt(server, "POST", `/v1/projects/${ref}/api-keys`, { body: { type: "publishable", name } })).body
      .api_key as string;
  const query = { query: "{ __typename }" };

  it("opens only the project a key belongs to", async () => {
    const otherKey = await newKey(otherRef, "other_web");
    const ownKey = await newKey(server.ref, "own_web");
    expect(
      (await atProjectHost(server, otherRef, "/graphql/v1", { apikey: otherKey, body: query })).status,
    ).toBe(200);
    expect(
      (await atProjectHost(server, otherRef, "/graphql/v1", { apikey: ownKey, body: query })).status,
    ).toBe(401);
    expect(
      (await atProjectHost(server, otherRef, "/graphql/v1", { apikey: server.anonKey, body: query })).status,
    ).toBe(401);
    expect(
      (await atProjectHost(server, server.ref, "/graphql/v1", { apikey: otherKey, body: query })).status,
    ).toBe(401);
    expect(
      (await atProjectHost(server, server.ref, "/graphql/v1", { apikey: ownKey, body: query })).status,
    ).toBe(200);
  });
});
