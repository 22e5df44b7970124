import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The fake providers listen on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.stop();
});

const settings = async () =>
  (await fetch(`${server.url}/auth/v1/settings`, { headers: { apikey: server.anonKey } })).json();

describe("the external provider slots of the auth config", () => {
  it("accepts and stores every slot, never answers a secret, and reports the switches in /settings", async () => {
    const patched = await management(server, "PATCH", "/config/auth", {
      external_google_enabled: true,
      external_google_client_id: "google-client",
      external_google_secret: "google-secret-4711",
      external_google_additional_client_ids: "ios-client,android-client",
      external_google_skip_nonce_check: true,
      external_google_email_optional: false,
      external_apple_enabled: true,
      external_apple_client_id: "com.example.web",
      external_apple_secret: "apple-secret-4711",
      external_apple_additional_client_ids: "com.example.ios",
      external_azure_url: "https://login.microsoftonline.com/tenant-1",
      external_workos_url: "https://api.workos.example.test",
      external_github_enabled: false,
      external_x_enabled: true,
      external_zoom_email_optional: true,
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      external_google_enabled: true,
      external_google_client_id: "google-client",
      external_google_secret: null,
      external_google_additional_client_ids: "ios-client,android-client",
      external_google_skip_nonce_check: true,
      external_apple_secret: null,
      external_azure_url: "https://login.microsoftonline.com/tenant-1",
      external_workos_url: "https://api.workos.example.test",
      external_x_enabled: true,
      external_zoom_email_optional: true,
      external_discord_enabled: null,
    });
    const got = await management(server, "GET", "/config/auth");
    expect(got.body.external_google_secret).toBeNull();
    expect(got.body.external_apple_additional_client_ids).toBe("com.example.ios");

    // Stored sealed: the secret is in the control plane, but not as written.
    const { rows } = await server.controlSql(
      "select config->>'external_google_secret' as secret from platform.auth_config where project_ref = $1",
      [server.ref],
    );
    expect(rows[0].secret).toBeTruthy();
    expect(rows[0].secret).not.toContain("google-secret-4711");

    const s = await settings();
    expect(s.external).toMatchObject({
      google: true,
      apple: true,
      github: false,
      discord: false,
      email: true,
    });
    expect(Object.keys(s.external)).toEqual(
      expect.arrayContaining(["linkedin_oidc", "slack_oidc", "workos", "kakao", "zoom", "anonymous_users"]),
    );
  });

  it("refuses fields the spec does not have and URLs that are not http(s)", async () => {
    for (const body of [
      { external_google_url: "https://accounts.example.test" },
      { external_github_additional_client_ids: "x" },
      { external_workos_email_optional: true },
      { external_keycloak_url: "javascript:alert(1)" },
      { external_gitlab_url: "not a url" },
      { external_google_enabled: "yes" },
    ]) {
      const res = await management(server, "PATCH", "/config/auth", body);
      expect(res.status).toBe(400);
    }
    const got = await management(server, "GET", "/config/auth");
    expect(got.body.external_keycloak_url).toBeNull();
    expect(got.body.external_gitlab_url).toBeNull();
  });
});
