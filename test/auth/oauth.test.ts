import http from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage, paramsOf, visit } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The OAuth provider listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

const CLIENT = { id: "strata-rp", secret: "rp-secret-for-the-test-4711" };
let ACCOUNT = {
  sub: "kc-user-1",
  email: "kc.user@idp.example.test",
  email_verified: true,
  name: "Kay Cee",
};

/**
 * A Keycloak-shaped identity provider: /auth answers the browser with a code at once, /token gives an access
 * token for the code to the client with the right secret, /userinfo the account's claims.
 */
async function startProvider() {
  const codes = new Map<string, string>();
  const tokens = new Set<string>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url!, "http://idp");
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (url.pathname.endsWith("/protocol/openid-connect/auth")) {
      if (url.searchParams.get("client_id") !== CLIENT.id) return json(400, { error: "invalid_client" });
      const code = `code-${codes.size}`;
      codes.set(code, url.searchParams.get("redirect_uri")!);
      const back = new URL(url.searchParams.get("redirect_uri")!);
      back.searchParams.set("code", code);
      back.searchParams.set("state", url.searchParams.get("state")!);
      res.writeHead(302, { location: back.href });
      return res.end();
    }
    if (url.pathname.endsWith("/protocol/openid-connect/token")) {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const basic = Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString("base64");
        const form = new URLSearchParams(body);
        if (req.headers.authorization !== `Basic ${basic}`) return json(401, { error: "invalid_client" });
        const code = form.get("code")!;
        if (codes.get(code) !== form.get("redirect_uri")) return json(400, { error: "invalid_grant" });
        codes.delete(code);
        const token = `at-${tokens.size}`;
        tokens.add(token);
        json(200, { access_token: token, token_type: "Bearer" });
      });
      return;
    }
    if (url.pathname.endsWith("/protocol/openid-connect/userinfo")) {
      const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
      return tokens.has(token) ? json(200, ACCOUNT) : json(401, { error: "invalid_token" });
    }
    json(404, {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const realm = `http://127.0.0.1:${(server.address() as AddressInfo).port}/realms/test`;
  return { realm, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** A browser following redirects through Strata and the provider until it leaves both. */
async function follow(start: string, stopAt: string): Promise<string> {
  let url = start;
  for (let hop = 0; hop < 10 && !url.startsWith(stopAt); hop++) url = (await visit(url)).location;
  return url;
}

describe("OAuth sign-in through the configurable OpenID Connect provider", () => {
  let server: TestServer;
  let provider: Awaited<ReturnType<typeof startProvider>>;

  beforeAll(async () => {
    server = await startTestServer();
    provider = await startProvider();
  });
  afterAll(async () => {
    await server.stop();
    await provider.close();
  });

  it("signs in with the provider's account, the same user each time, while the provider is enabled", async () => {
    const client = () =>
      createClient(server.url, server.anonKey, {
        auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
      });
    const options = { redirectTo: "http://localhost:3000/done", skipBrowserRedirect: true };
    const disabled = await client().auth.signInWithOAuth({ provider: "keycloak", options });
    expect((await visit(disabled.data.url!)).status).toBe(400);

    const patched = await management(server, "PATCH", "/config/auth", {
      external_keycloak_enabled: true,
      external_keycloak_client_id: CLIENT.id,
      external_keycloak_secret: CLIENT.secret,
      external_keycloak_url: provider.realm,
    });
    expect(patched.status).toBe(200);
    expect(patched.body.external_keycloak_secret).toBeNull();

    const ids = [];
    for (let i = 0; i < 2; i++) {
      const browser = client();
      const started = await browser.auth.signInWithOAuth({ provider: "keycloak", options });
      const landed = await follow(started.data.url!, "http://localhost:3000/done");
      const params = paramsOf(landed);
      const claims = decodeJwt(params.access_token) as { sub: string; amr: { method: string }[] };
      expect(claims.amr.map((m) => m.method)).toContain("oauth");
      const set = await browser.auth.setSession({
        access_token: params.access_token,
        refresh_token: params.refresh_token,
      });
      expect(set.error).toBeNull();
      expect(set.data.user).toMatchObject({
        email: ACCOUNT.email,
        app_metadata: { provider: "keycloak" },
      });
      expect(set.data.user?.identities?.[0]).toMatchObject({
        provider: "keycloak",
        identity_data: { sub: ACCOUNT.sub },
      });
      ids.push(claims.sub);
    }
    expect(ids[1]).toBe(ids[0]);
    const { rows } = await server.sql(
      "select count(*)::int as n from auth.identities where provider = 'keycloak'",
    );
    expect(rows[0].n).toBe(1);
  });

  it("signs a provider's unverified address in per mailer_autoconfirm and mailer_allow_unverified_email_sign_ins", async () => {
    const client = () =>
      createClient(server.url, server.anonKey, {
        auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
      });
    const options = { redirectTo: "http://localhost:3000/done", skipBrowserRedirect: true };
    const signIn = async () => {
      const started = await client().auth.signInWithOAuth({ provider: "keycloak", options });
      return paramsOf(await follow(started.data.url!, "http://localhost:3000/done"));
    };
    const userRow = async (email: string) =>
      (await server.sql("select id, email_confirmed_at from auth.users where email = $1", [email])).rows[0];
    const sessions = async (id: string) =>
      (await server.sql("select count(*)::int as n from auth.sessions where user_id = $1", [id])).rows[0].n;
    const saved = ACCOUNT;
    try {
      ACCOUNT = {
        sub: "kc-user-2",
        email: "unverified@idp.example.test",
        email_verified: false,
        name: "Una",
      };
      await management(server, "PATCH", "/config/auth", { mailer_autoconfirm: false });
      const refused = await signIn();
      expect(refused.error_code).toBe("provider_email_needs_verification");
      expect(refused.error_description).toBe(
        "Unverified email with keycloak. Verify the email with keycloak in order to sign in",
      );
      expect(refused.access_token).toBeUndefined();
      // The user is kept, unconfirmed, without a session; trying again changes nothing.
      const kept = await userRow(ACCOUNT.email);
      expect(kept.email_confirmed_at).toBeNull();
      expect(await sessions(kept.id)).toBe(0);
      expect((await signIn()).error_code).toBe("provider_email_needs_verification");

      await management(server, "PATCH", "/config/auth", { mailer_allow_unverified_email_sign_ins: true });
      const allowed = await signIn();
      expect(allowed.access_token).toBeTruthy();
      expect((await userRow(ACCOUNT.email)).email_confirmed_at).toBeNull();
      expect(await sessions(kept.id)).toBe(1);

      // With mailer_autoconfirm the address counts as confirmed.
      await management(server, "PATCH", "/config/auth", {
        mailer_allow_unverified_email_sign_ins: false,
        mailer_autoconfirm: true,
      });
      ACCOUNT = { sub: "kc-user-3", email: "auto@idp.example.test", email_verified: false, name: "Otto" };
      expect((await signIn()).access_token).toBeTruthy();
      expect((await userRow(ACCOUNT.email)).email_confirmed_at).not.toBeNull();
    } finally {
      ACCOUNT = saved;
    }
  });
});
