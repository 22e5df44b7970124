import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage } from "./mailbox";

/** One siteverify call as the local receiver saw it. */
interface Verification {
  provider: string;
  secret: string | null;
  response: string | null;
  remoteip: string | null;
}

describe("CAPTCHA protection from the auth config (hCaptcha and Turnstile siteverify)", () => {
  let server: TestServer;
  let receiver: Server;
  const seen: Verification[] = [];
  const HCAPTCHA_SECRET = "0x-hcaptcha-secret-4d1f";
  const TURNSTILE_SECRET = "0x-turnstile-secret-9a2c";

  const client = (key = server.anonKey) =>
    createClient(server.url, key, {
      auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
  const config = async (fields: Record<string, unknown>) => {
    const res = await management(server, "PATCH", "/config/auth", fields);
    expect(res.status).toBe(200);
    return res.body;
  };
  const userCount = async (email: string) =>
    Number(
      (await server.sql("select count(*)::int as n from auth.users where email = $1", [email])).rows[0].n,
    );

  beforeAll(async () => {
    // Plays both providers: a token is good when it names the provider it is sent to.
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const provider = req.url!.slice(1);
        const form = new URLSearchParams(body);
        seen.push({
          provider,
          secret: form.get("secret"),
          response: form.get("response"),
          remoteip: form.get("remoteip"),
        });
        const good = form.get("response") === `good-${provider}-token`;
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify(
            good ? { success: true } : { success: false, "error-codes": ["invalid-input-response"] },
          ),
        );
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    server = await startTestServer({
      STRATA_CAPTCHA_HCAPTCHA_URL: `${url}/hcaptcha`,
      STRATA_CAPTCHA_TURNSTILE_URL: `${url}/turnstile`,
    });
  });
  afterAll(async () => {
    await server.stop();
    await new Promise((r) => receiver.close(r));
  });

  it("is configured through the Management API: a secret is required, stored sealed and never answered", async () => {
    const defaults = (await management(server, "GET", "/config/auth")).body;
    expect(defaults).toMatchObject({
      security_captcha_enabled: false,
      security_captcha_provider: "hcaptcha",
    });
    const noSecret = await management(server, "PATCH", "/config/auth", { security_captcha_enabled: true });
    expect(noSecret.status).toBe(400);
    expect(noSecret.body.message).toMatch(/security_captcha_secret/);
    const badProvider = await management(server, "PATCH", "/config/auth", {
      security_captcha_provider: "recaptcha",
    });
    expect(badProvider.status).toBe(400);
    const answered = await config({
      security_captcha_enabled: true,
      security_captcha_provider: "hcaptcha",
      security_captcha_secret: HCAPTCHA_SECRET,
    });
    expect(answered).toMatchObject({ security_captcha_enabled: true, security_captcha_secret: null });
    expect(JSON.stringify((await management(server, "GET", "/config/auth")).body)).not.toContain(
      HCAPTCHA_SECRET,
    );
    const stored = await server.controlSql(
      "select config->>'security_captcha_secret' as secret from platform.auth_config where project_ref = $1",
      [server.ref],
    );
    expect(stored.rows[0].secret.startsWith("kek1:")).toBe(true);
    expect(stored.rows[0].secret).not.toContain(HCAPTCHA_SECRET);
  });

  it("hCaptcha: sign-up and password sign-in need a good token; refresh and the service key do not", async () => {
    seen.length = 0;
    const auth = client().auth;
    const email = "captcha-ada@example.com";
    const missing = await auth.signUp({ email, password: "correct-horse-1" });
    expect(missing.error).toMatchObject({ status: 400, code: "captcha_failed" });
    expect(missing.error!.message).toBe("captcha protection: request disallowed (no captcha_token found)");
    expect(seen).toHaveLength(0);
    const bad = await auth.signUp({
      email,
      password: "correct-horse-1",
      options: { captchaToken: "forged" },
    });
    expect(bad.error).toMatchObject({ status: 400, code: "captcha_failed" });
    expect(bad.error!.message).toBe("captcha protection: request disallowed (invalid-input-response)");
    expect(await userCount(email)).toBe(0);
    const good = await auth.signUp({
      email,
      password: "correct-horse-1",
      options: { captchaToken: "good-hcaptcha-token" },
    });
    expect(good.error).toBeNull();
    expect(good.data.session).toBeTruthy();
    expect(await userCount(email)).toBe(1);
    // The receiver saw the project's secret, the token and the client's address.
    expect(seen).toHaveLength(2);
    expect(seen[1]).toMatchObject({
      provider: "hcaptcha",
      secret: HCAPTCHA_SECRET,
      response: "good-hcaptcha-token",
    });
    expect(seen[1].remoteip).toMatch(/127\.0\.0\.1$/);

    const signIn = await auth.signInWithPassword({ email, password: "correct-horse-1" });
    expect(signIn.error).toMatchObject({ code: "captcha_failed" });
    const signedIn = await auth.signInWithPassword({
      email,
      password: "correct-horse-1",
      options: { captchaToken: "good-hcaptcha-token" },
    });
    expect(signedIn.error).toBeNull();
    // A refresh continues a sign-in: no token needed.
    const refreshed = await auth.refreshSession();
    expect(refreshed.error).toBeNull();
    expect(refreshed.data.session?.access_token).toBeTruthy();

    // Magic links, recovery and resend are guarded too.
    expect((await auth.signInWithOtp({ email })).error).toMatchObject({ code: "captcha_failed" });
    expect((await auth.resetPasswordForEmail(email)).error).toMatchObject({ code: "captcha_failed" });
    expect((await auth.resend({ type: "signup", email })).error).toMatchObject({ code: "captcha_failed" });

    // The service key skips the check, as the platform's admin credentials do.
    const admin = await client(server.serviceKey).auth.signUp({
      email: "captcha-svc@example.com",
      password: "correct-horse-1",
    });
    expect(admin.error).toBeNull();
  });

  it("Turnstile: anonymous sign-in with the provider's token and secret; off again, no token needed", async () => {
    await config({
      security_captcha_provider: "turnstile",
      security_captcha_secret: TURNSTILE_SECRET,
      external_anonymous_users_enabled: true,
    });
    seen.length = 0;
    const auth = client().auth;
    expect((await auth.signInAnonymously()).error).toMatchObject({ code: "captcha_failed" });
    // A token of the other provider is no good here.
    const other = await auth.signInAnonymously({ options: { captchaToken: "good-hcaptcha-token" } });
    expect(other.error).toMatchObject({ status: 400, code: "captcha_failed" });
    const anon = await auth.signInAnonymously({ options: { captchaToken: "good-turnstile-token" } });
    expect(anon.error).toBeNull();
    expect(anon.data.user?.is_anonymous).toBe(true);
    expect(seen.map((s) => [s.provider, s.secret, s.response])).toEqual([
      ["turnstile", TURNSTILE_SECRET, "good-hcaptcha-token"],
      ["turnstile", TURNSTILE_SECRET, "good-turnstile-token"],
    ]);

    // With security_sb_forwarded_for_enabled, the client's address is Sb-Forwarded-For's first one.
    const sbff = (ip: string) =>
      fetch(`${server.url}/auth/v1/signup`, {
        method: "POST",
        headers: { apikey: server.anonKey, "content-type": "application/json", "sb-forwarded-for": ip },
        body: JSON.stringify({ gotrue_meta_security: { captcha_token: "good-turnstile-token" } }),
      });
    seen.length = 0;
    expect((await sbff("203.0.113.9, 10.0.0.1")).status).toBe(200);
    await config({ security_sb_forwarded_for_enabled: true });
    expect((await sbff("203.0.113.9, 10.0.0.1")).status).toBe(200);
    expect((await sbff("not-an-ip")).status).toBe(200);
    expect(seen.map((s) => s.remoteip)).toEqual([seen[0].remoteip, "203.0.113.9", seen[0].remoteip]);
    expect(seen[0].remoteip).toMatch(/127\.0\.0\.1$/);
    await config({ security_sb_forwarded_for_enabled: false });

    await config({ security_captcha_enabled: false });
    seen.length = 0;
    const plain = await client().auth.signUp({
      email: "captcha-off@example.com",
      password: "correct-horse-1",
    });
    expect(plain.error).toBeNull();
    expect(seen).toHaveLength(0);
  });
});
