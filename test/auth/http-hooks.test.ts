import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { Webhook } from "standardwebhooks";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage, startMailbox } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The hook and the SMTP server listen on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

interface Received {
  headers: Record<string, string>;
  body: string;
}

describe("HTTP auth hooks", () => {
  let server: TestServer;
  let hook: Server;
  let hookUrl: string;
  const received: Received[] = [];
  let answer: (body: Record<string, unknown>) => { status: number; json?: unknown } = () => ({ status: 204 });
  const secret = "whsec_" + randomBytes(32).toString("base64");

  beforeAll(async () => {
    server = await startTestServer();
    hook = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push({ headers: req.headers as Record<string, string>, body });
        const out = answer(JSON.parse(body));
        res.writeHead(out.status, { "content-type": "application/json" });
        res.end(out.json === undefined ? undefined : JSON.stringify(out.json));
      });
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  });
  afterAll(async () => {
    await new Promise((r) => hook.close(r));
    await server.stop();
  });

  it("signs the custom access token hook's payload and takes the claims it answers", async () => {
    answer = (body) => ({
      status: 200,
      json: { claims: { ...(body.claims as object), plan: "pro", via: body.authentication_method } },
    });
    const set = await management(server, "PATCH", "/config/auth", {
      hook_custom_access_token_enabled: true,
      hook_custom_access_token_uri: hookUrl,
      hook_custom_access_token_secrets: `v1,${secret}`,
    });
    expect(set.status).toBe(200);
    const a = createClient(server.url, server.anonKey, {
      auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
    const { data, error } = await a.auth.signUp({ email: "hana@example.test", password: "Hana-pass-1234" });
    expect(error).toBeNull();
    expect(decodeJwt(data.session!.access_token)).toMatchObject({ plan: "pro", via: "password" });

    const call = received.at(-1)!;
    expect(call.headers["webhook-signature"]).toMatch(/^v1,/);
    // The signature checks out with the configured secret (and not with another one).
    const payload = new Webhook(secret).verify(call.body, call.headers) as Record<string, unknown>;
    const { rows } = await server.sql("select id from auth.users where email = 'hana@example.test'");
    expect(payload).toMatchObject({ user_id: rows[0].id, authentication_method: "password" });
    const other = new Webhook("whsec_" + randomBytes(32).toString("base64"));
    expect(() => other.verify(call.body, call.headers)).toThrow();

    // The hook's error answer is the client's error; no session is handed out.
    answer = () => ({ status: 200, json: { error: { http_code: 403, message: "No tokens today" } } });
    const refused = await a.auth.refreshSession();
    expect(refused.error).toMatchObject({ status: 403, message: "No tokens today" });
  });

  it("refuses a plain http hook that is not on loopback, and an unsigned configuration", async () => {
    await management(server, "PATCH", "/config/auth", {
      hook_custom_access_token_uri: "http://10.0.0.1/hook",
    });
    const before = received.length;
    const signUp = (body: Record<string, string>, grant = "") =>
      fetch(`${server.url}/auth/v1/${grant ? "token?grant_type=" + grant : "signup"}`, {
        method: "POST",
        headers: { apikey: server.anonKey, "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error_code: string } }));
    const internal = await signUp({ email: "ida@example.test", password: "Ida-pass-12345" });
    expect(internal).toMatchObject({ status: 500, body: { error_code: "unexpected_failure" } });
    await management(server, "PATCH", "/config/auth", {
      hook_custom_access_token_uri: hookUrl,
      hook_custom_access_token_secrets: "",
    });
    const unsigned = await signUp({ email: "hana@example.test", password: "Hana-pass-1234" }, "password");
    expect(unsigned).toMatchObject({ status: 500, body: { error_code: "hook_configuration_error" } });
    expect(received.length).toBe(before);
    await management(server, "PATCH", "/config/auth", { hook_custom_access_token_enabled: false });
  });

  it("hands auth mail to the send-email hook instead of SMTP while it is enabled", async () => {
    const mailbox = await startMailbox({ user: "hooks", pass: "hooks-smtp-pass" });
    try {
      const set = await management(server, "PATCH", "/config/auth", {
        mailer_autoconfirm: false,
        smtp_host: "127.0.0.1",
        smtp_port: String(mailbox.port),
        smtp_user: "hooks",
        smtp_pass: "hooks-smtp-pass",
        smtp_admin_email: "auth@example.test",
        smtp_max_frequency: 0,
        rate_limit_email_sent: 100,
        hook_send_email_enabled: true,
        hook_send_email_uri: hookUrl,
        hook_send_email_secrets: `v1,${secret}`,
      });
      expect(set.status).toBe(200);
      answer = () => ({ status: 200, json: {} });
      const a = createClient(server.url, server.anonKey, {
        auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
      });
      const signUp = await a.auth.signUp({
        email: "jon@example.test",
        password: "Jon-pass-12345",
        options: { emailRedirectTo: "http://localhost:3000/welcome" },
      });
      expect(signUp.error).toBeNull();
      expect(signUp.data.session).toBeNull();
      const call = received.at(-1)!;
      const payload = new Webhook(secret).verify(call.body, call.headers) as {
        user: { id: string; email: string };
        email_data: Record<string, string>;
      };
      expect(payload.user).toMatchObject({ id: signUp.data.user!.id, email: "jon@example.test" });
      expect(payload.email_data).toMatchObject({
        email_action_type: "signup",
        redirect_to: "http://localhost:3000/welcome",
        site_url: "http://localhost:3000",
        token: expect.stringMatching(/^[0-9]{6}$/),
        token_hash: expect.stringMatching(/^[0-9a-f]{56}$/),
      });
      expect(mailbox.countFor("jon@example.test")).toBe(0);
      // The code the hook got is the real one.
      const verified = await a.auth.verifyOtp({
        email: "jon@example.test",
        token: payload.email_data.token,
        type: "signup",
      });
      expect(verified.error).toBeNull();
      expect(verified.data.session?.access_token).toBeTruthy();

      // A failing hook fails the sign-up, and nothing of it stays.
      answer = () => ({ status: 503, json: {} });
      const failed = await fetch(`${server.url}/auth/v1/signup`, {
        method: "POST",
        headers: { apikey: server.anonKey, "content-type": "application/json" },
        body: JSON.stringify({ email: "kim@example.test", password: "Kim-pass-12345" }),
      });
      expect(failed.status).toBe(500);
      const { rows } = await server.sql(
        "select count(*)::int as n from auth.users where email = 'kim@example.test'",
      );
      expect(rows[0].n).toBe(0);

      // Switched off, the mail goes over SMTP again.
      await management(server, "PATCH", "/config/auth", { hook_send_email_enabled: false });
      const before = received.length;
      expect(
        (await a.auth.signUp({ email: "kim@example.test", password: "Kim-pass-12345" })).error,
      ).toBeNull();
      expect((await mailbox.next("kim@example.test")).subject).toBe("Confirm Your Email");
      expect(received.length).toBe(before);
    } finally {
      await mailbox.close();
    }
  });
});
