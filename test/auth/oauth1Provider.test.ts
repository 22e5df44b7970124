import { createHmac, randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "@supabase/supabase-js";
import OAuth from "oauth-1.0a";
import { allowLoopbackForTests } from "../../src/net/outbound";
import { startTestServer, type TestServer } from "../helpers/server";
import { follow } from "./fakeProvider";
import { management } from "./helpers";
import { memoryStorage, paramsOf } from "./mailbox";

// The fake provider listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

const CLIENT = { key: "twitter-client", secret: "twitter-secret-4711" };
const USER = {
  id_str: "1234567",
  screen_name: "tweety",
  name: "Tweety Bird",
  email: "tweety@example.test",
  profile_image_url_https: "https://pbs.example.test/t.png",
};
const DONE = "http://localhost:3000/done";

/**
 * A local OAuth 1.0a provider in Twitter's shape: request token, authenticate (answering the browser at once
 * with the verifier), access token and verify_credentials. Each request's HMAC-SHA1 signature is checked with
 * the same library Strata signs with, under the client's secret and the token's; tokens are used once.
 */
async function startTwitter() {
  const oauth = new OAuth({
    consumer: CLIENT,
    signature_method: "HMAC-SHA1",
    hash_function: (base, key) => createHmac("sha1", key).update(base).digest("base64"),
  });
  const requestTokens = new Map<string, { secret: string; callback: string; verifier: string }>();
  const accessTokens = new Map<string, string>();
  const verified: string[] = [];
  let url = "";

  /** The request's oauth_* parameters if its signature holds under `secretOf(token)`. */
  const signed = (req: http.IncomingMessage, secretOf: (token: string) => string | undefined) => {
    const header = String(req.headers.authorization ?? "");
    if (!header.startsWith("OAuth ")) return undefined;
    const params = {} as OAuth.Authorization & Record<string, string>;
    for (const [, k, v] of header.slice(6).matchAll(/([a-z_]+)="([^"]*)"/g))
      params[k] = decodeURIComponent(v);
    const { oauth_signature: signature, ...data } = params;
    if (data.oauth_consumer_key !== CLIENT.key || data.oauth_signature_method !== "HMAC-SHA1")
      return undefined;
    const tokenSecret = data.oauth_token === undefined ? "" : secretOf(data.oauth_token);
    if (tokenSecret === undefined) return undefined;
    const request = { url: `${url}${req.url}`, method: req.method! };
    if (oauth.getSignature(request, tokenSecret, data) !== signature) return undefined;
    verified.push(new URL(request.url).pathname);
    return data;
  };
  const form = (res: http.ServerResponse, body: Record<string, string>) => {
    res.writeHead(200, { "content-type": "application/x-www-form-urlencoded" });
    res.end(new URLSearchParams(body).toString());
  };
  const refuse = (res: http.ServerResponse) => {
    res.writeHead(401, { "content-type": "application/json" });
    res.end('{"errors":[{"code":32}]}');
  };

  const server = http.createServer((req, res) => {
    const path = new URL(req.url!, url).pathname;
    if (req.method === "POST" && path === "/oauth/request_token") {
      const data = signed(req, () => undefined);
      if (!data?.oauth_callback) return refuse(res);
      const token = `req-${randomUUID()}`;
      const secret = randomUUID();
      requestTokens.set(token, { secret, callback: data.oauth_callback, verifier: randomUUID() });
      return form(res, { oauth_token: token, oauth_token_secret: secret, oauth_callback_confirmed: "true" });
    }
    if (req.method === "GET" && path === "/oauth/authenticate") {
      const token = new URL(req.url!, url).searchParams.get("oauth_token") ?? "";
      const issued = requestTokens.get(token);
      if (!issued) return refuse(res);
      const back = new URL(issued.callback);
      back.searchParams.set("oauth_token", token);
      back.searchParams.set("oauth_verifier", issued.verifier);
      res.writeHead(302, { location: back.href });
      return res.end();
    }
    if (req.method === "POST" && path === "/oauth/access_token") {
      const data = signed(req, (t) => requestTokens.get(t)?.secret);
      const requestToken = data?.oauth_token ?? "";
      const issued = requestTokens.get(requestToken);
      if (!issued || issued.verifier !== data?.oauth_verifier) return refuse(res);
      requestTokens.delete(requestToken);
      const token = `at-${randomUUID()}`;
      accessTokens.set(token, randomUUID());
      return form(res, {
        oauth_token: token,
        oauth_token_secret: accessTokens.get(token)!,
        user_id: USER.id_str,
        screen_name: USER.screen_name,
      });
    }
    if (req.method === "GET" && path === "/1.1/account/verify_credentials.json") {
      const asked = new URL(req.url!, url).searchParams;
      if (!signed(req, (t) => accessTokens.get(t)) || asked.get("include_email") !== "true")
        return refuse(res);
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify(USER));
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, verified, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

let twitter: Awaited<ReturnType<typeof startTwitter>>;
let server: TestServer;

beforeAll(async () => {
  twitter = await startTwitter();
  server = await startTestServer({ STRATA_AUTH_PROVIDER_BASE_TWITTER: twitter.url });
});
afterAll(async () => {
  await server.stop();
  await twitter.close();
});

const enable = async (secret = CLIENT.secret) =>
  expect(
    (
      await management(server, "PATCH", "/config/auth", {
        external_twitter_enabled: true,
        external_twitter_client_id: CLIENT.key,
        external_twitter_secret: secret,
      })
    ).status,
  ).toBe(200);

const client = (flowType: "implicit" | "pkce") =>
  createClient(server.url, server.anonKey, {
    auth: {
      flowType,
      persistSession: true,
      autoRefreshToken: false,
      detectSessionInUrl: false,
      storage: memoryStorage(),
    },
  });

const count = async (table: string) =>
  (await server.sql(`select count(*)::int as n from ${table}`)).rows[0].n as number;

/** The callback URL the provider sends the browser to, for a sign-in started by supabase-js. */
async function providerCallback(): Promise<URL> {
  const started = await client("implicit").auth.signInWithOAuth({
    provider: "twitter",
    options: { redirectTo: DONE, skipBrowserRedirect: true },
  });
  const toProvider = await fetch(started.data.url!, { redirect: "manual" });
  expect(toProvider.status).toBe(302);
  const back = await fetch(toProvider.headers.get("location")!, { redirect: "manual" });
  return new URL(back.headers.get("location")!);
}

describe("Twitter (OAuth 1.0a) sign-in", () => {
  beforeAll(() => enable());

  it("implicit flow: request token, authenticate, access token, the user by signed requests", async () => {
    const browser = client("implicit");
    const started = await browser.auth.signInWithOAuth({
      provider: "twitter",
      options: { redirectTo: DONE, skipBrowserRedirect: true },
    });
    const params = paramsOf(await follow(started.data.url!, DONE));
    expect(params.error_description).toBeUndefined();
    expect(params.provider_token).toMatch(/^at-/);
    const { data, error } = await browser.auth.setSession({
      access_token: params.access_token,
      refresh_token: params.refresh_token,
    });
    expect(error).toBeNull();
    expect(data.user!.email).toBe(USER.email);
    expect(data.user!.app_metadata).toMatchObject({ provider: "twitter", providers: ["twitter"] });
    // Every step signed and verified by the provider.
    expect(twitter.verified.slice(-3)).toEqual([
      "/oauth/request_token",
      "/oauth/access_token",
      "/1.1/account/verify_credentials.json",
    ]);

    const { rows } = await server.sql(
      `select i.user_id, i.identity_data, u.email, u.email_confirmed_at
         from auth.identities i join auth.users u on u.id = i.user_id
        where i.provider = 'twitter' and i.provider_id = $1`,
      [USER.id_str],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0].user_id).toBe(data.user!.id);
    expect(rows[0].email_confirmed_at).not.toBeNull();
    expect(rows[0].identity_data).toMatchObject({
      iss: `${twitter.url}/1.1/account/verify_credentials.json`,
      sub: USER.id_str,
      provider_id: USER.id_str,
      name: USER.name,
      full_name: USER.name,
      user_name: USER.screen_name,
      preferred_username: USER.screen_name,
      avatar_url: USER.profile_image_url_https,
      email: USER.email,
      email_verified: true,
    });
    // The request token was used once and is gone.
    expect(await count("auth.oauth1_request_tokens")).toBe(0);
  });

  it("PKCE flow: a code, exchanged once for the session and the provider's access token", async () => {
    const browser = client("pkce");
    const started = await browser.auth.signInWithOAuth({
      provider: "twitter",
      options: { redirectTo: DONE, skipBrowserRedirect: true },
    });
    const params = paramsOf(await follow(started.data.url!, DONE));
    expect(params.code).toBeTruthy();
    expect(params.access_token).toBeUndefined();
    const exchanged = await browser.auth.exchangeCodeForSession(params.code);
    expect(exchanged.error).toBeNull();
    expect(exchanged.data.user!.email).toBe(USER.email);
    expect(exchanged.data.session!.provider_token).toMatch(/^at-/);
    expect(await count("auth.flow_state where provider_type = 'twitter'")).toBe(0);
  });

  it("refuses a tampered, swapped, replayed or expired request token, and signs nobody in", async () => {
    await server.sql("delete from auth.users");
    const refusedAt = async (callback: URL) => {
      const res = await fetch(callback, { redirect: "manual" });
      expect(res.status).toBe(303);
      const landed = paramsOf(res.headers.get("location")!);
      expect(landed.access_token).toBeUndefined();
      return landed.error_code;
    };

    // Tampered: another token than the one this sign-in got.
    const tampered = await providerCallback();
    tampered.searchParams.set("oauth_token", `${tampered.searchParams.get("oauth_token")}x`);
    expect(await refusedAt(tampered)).toBe("bad_oauth_callback");

    // Swapped: a request token another sign-in got, under this one's state.
    const [mine, theirs] = [await providerCallback(), await providerCallback()];
    mine.searchParams.set("oauth_token", theirs.searchParams.get("oauth_token")!);
    mine.searchParams.set("oauth_verifier", theirs.searchParams.get("oauth_verifier")!);
    expect(await refusedAt(mine)).toBe("bad_oauth_callback");

    // Expired: got more than ten minutes ago (as the store says).
    const expired = await providerCallback();
    await server.sql(
      "update auth.oauth1_request_tokens set created_at = now() - interval '11 minutes' where token = $1",
      [expired.searchParams.get("oauth_token")],
    );
    expect(await refusedAt(expired)).toBe("bad_oauth_callback");

    // Replayed: a callback that signed in once does not sign in again.
    const once = await providerCallback();
    const first = await fetch(once, { redirect: "manual" });
    expect(paramsOf(first.headers.get("location")!).access_token).toBeTruthy();
    expect(await refusedAt(once)).toBe("bad_oauth_callback");

    const { rows } = await server.sql(
      "select count(*)::int as n from auth.identities where provider = 'twitter'",
    );
    expect(rows[0].n).toBe(1);
    expect(await count("auth.users")).toBe(1);
  });

  it("gets no request token with a client secret the provider does not know", async () => {
    await enable("not-the-secret");
    try {
      const before = await count("auth.oauth1_request_tokens");
      for (const pkce of [
        "",
        "&code_challenge=abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG&code_challenge_method=s256",
      ]) {
        const res = await fetch(
          `${server.url}/auth/v1/authorize?provider=twitter&redirect_to=${DONE}${pkce}`,
          { redirect: "manual" },
        );
        expect(res.status).toBe(500);
        expect((await res.json()).msg).toBe("Error getting request token from external provider");
      }
      expect(await count("auth.oauth1_request_tokens")).toBe(before);
      expect(await count("auth.flow_state where provider_type = 'twitter'")).toBe(0);
    } finally {
      await enable();
    }
  });
});
