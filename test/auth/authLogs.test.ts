import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";

/**
 * auth_logs through the Management API's logs endpoint: every sign-in, refused sign-in and token refresh
 * is an event, and a refusal answered as a redirect (a link's) is recorded as a failure.
 */
describe("auth_logs events of sign-ins, failures and refreshes", () => {
  let server: TestServer;
  const auth = (path: string, body: unknown) =>
    fetch(`${server.url}/auth/v1${path}`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  /** The auth_logs events' metadata with `action`, asked until they are there (events are written in batches). */
  async function events(action: string, count = 1): Promise<any[]> {
    const q = new URLSearchParams({
      sql: `select metadata from auth_logs where metadata->>'action' = '${action}' order by timestamp`,
      iso_timestamp_start: new Date(Date.now() - 600_000).toISOString(),
      iso_timestamp_end: new Date(Date.now() + 60_000).toISOString(),
    });
    for (let i = 0; i < 100; i++) {
      const r = await management(server, "GET", `/analytics/endpoints/logs?${q}`);
      expect(r.status).toBe(200);
      if (r.body.result.length >= count) return r.body.result.map((row: any) => row.metadata);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`fewer than ${count} ${action} events`);
  }

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("records a password sign-in, a refused one, a refresh and a refused link", async () => {
    const credentials = { email: "logs@example.test", password: "Logs-pass-1234" };
    expect((await auth("/signup", credentials)).status).toBe(200);
    const signedIn = await auth("/token?grant_type=password", credentials);
    expect(signedIn.status).toBe(200);
    const { refresh_token, user } = await signedIn.json();
    expect(
      (await auth("/token?grant_type=password", { ...credentials, password: "wrong-1234" })).status,
    ).toBe(400);
    expect((await auth("/token?grant_type=refresh_token", { refresh_token })).status).toBe(200);
    const link = await fetch(`${server.url}/auth/v1/verify?type=magiclink&token=not-a-token`, {
      headers: { apikey: server.anonKey },
      redirect: "manual",
    });
    expect(link.status).toBe(303);

    expect(await events("login")).toEqual([
      expect.objectContaining({ grant_type: "password", status: 200, user_id: user.id, level: "info" }),
    ]);
    expect(await events("login_failed")).toEqual([
      expect.objectContaining({ grant_type: "password", status: 400, error_code: "invalid_credentials" }),
    ]);
    expect(await events("token_refreshed")).toEqual([
      expect.objectContaining({ grant_type: "refresh_token", status: 200, user_id: user.id }),
    ]);
    expect(await events("user_verification_failed")).toEqual([
      expect.objectContaining({ path: "/verify", status: 303, error_code: "otp_expired", level: "warning" }),
    ]);
  });
});
