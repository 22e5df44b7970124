import { createClient, type Provider } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { follow, startFakeProvider, type FakeProvider } from "./fakeProvider";
import { management } from "./helpers";
import { memoryStorage, paramsOf } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The fake providers listen on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

/**
 * Custom OAuth 2.0 / OIDC providers (custom_oauth_enabled): managed through auth-js
 * `auth.admin.customProviders`, signed in with through `signInWithOAuth({ provider: "custom:<name>" })`
 * against local fakes: an OIDC one (discovery document, ID token) and a plain OAuth 2.0 one (userinfo).
 */
describe("custom OAuth and OIDC providers", () => {
  let server: TestServer;
  let oidc: FakeProvider;
  let plain: FakeProvider;
  const DONE = "http://localhost:3000/done";
  const admin = () =>
    createClient(server.url, server.serviceKey, { auth: { persistSession: false, autoRefreshToken: false } })
      .auth.admin.customProviders;

  /** Signs in with `provider` through supabase-js (PKCE) and the fake; the user, or the error of the redirect. */
  async function signIn(provider: string) {
    const browser = createClient(server.url, server.anonKey, {
      auth: { flowType: "pkce", persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
    const started = await browser.auth.signInWithOAuth({
      provider: provider as Provider,
      options: { redirectTo: DONE, skipBrowserRedirect: true, scopes: "groups" },
    });
    expect(started.error).toBeNull();
    const params = paramsOf(await follow(started.data.url!, "http://localhost:3000/"));
    if (!params.code) return { error: params.error_code ?? "no code", user: undefined };
    const exchanged = await browser.auth.exchangeCodeForSession(params.code);
    expect(exchanged.error).toBeNull();
    return { error: undefined, user: exchanged.data.user! };
  }
  const identity = async (provider: string, subject: string) =>
    (
      await server.sql(
        `select i.identity_data, u.email, u.email_confirmed_at is not null as confirmed
           from auth.identities i join auth.users u on u.id = i.user_id
          where i.provider = $1 and i.provider_id = $2`,
        [provider, subject],
      )
    ).rows;

  beforeAll(async () => {
    oidc = await startFakeProvider({
      clientId: "oidc-client",
      secret: "oidc-secret-4711",
      idToken: {
        sub: "o-1",
        email: "oona@example.test",
        email_verified: true,
        name: "Oona",
        department: "R&D",
      },
    });
    plain = await startFakeProvider({
      clientId: "plain-client",
      secret: "plain-secret-4711",
      api: {
        "/api/me": { id: "p-7", sub: "p-7", mail: "pat@example.test", login: "pat", email_verified: true },
      },
    });
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.stop();
    await oidc?.close();
    await plain?.close();
  });

  it("are refused until the project enables them", async () => {
    const listed = await admin().listProviders();
    expect(listed.error).toMatchObject({ status: 404, code: "feature_disabled" });
    expect((await management(server, "PATCH", "/config/auth", { custom_oauth_enabled: true })).status).toBe(
      200,
    );
  });

  it("creates an OIDC provider from its discovery document and signs its user in from the ID token", async () => {
    const created = await admin().createProvider({
      provider_type: "oidc",
      identifier: "custom:acme",
      name: "Acme SSO",
      client_id: "oidc-client",
      client_secret: "oidc-secret-4711",
      issuer: oidc.issuer,
      scopes: ["email", "profile"],
      custom_claims_allowlist: ["department"],
      attribute_mapping: { nickname: "name" },
    } as never);
    expect(created.error).toBeNull();
    expect(created.data).toMatchObject({ identifier: "custom:acme", scopes: ["openid", "email", "profile"] });
    expect(JSON.stringify(created.data)).not.toContain("oidc-secret-4711");
    expect((created.data as any).discovery_document.token_endpoint).toMatch(/^http:\/\/127\.0\.0\.1/);

    const { user, error } = await signIn("custom:acme");
    expect(error).toBeUndefined();
    expect(user!.email).toBe("oona@example.test");
    expect(user!.app_metadata).toMatchObject({ provider: "custom:acme" });
    const rows = await identity("custom:acme", "o-1");
    expect(rows).toEqual([
      {
        email: "oona@example.test",
        confirmed: true,
        identity_data: expect.objectContaining({
          sub: "o-1",
          name: "Oona",
          nickname: "Oona",
          custom_claims: { department: "R&D" },
        }),
      },
    ]);
    // openid with the provider's and the caller's scopes; the provider's PKCE; the fake's client.
    const asked = oidc.authorizeRequests.at(-1)!;
    expect(asked.searchParams.get("scope")!.split(" ")).toEqual(["openid", "email", "profile", "groups"]);
    expect(asked.searchParams.get("code_challenge_method")).toBe("S256");
    expect(oidc.tokenRequests.at(-1)!.form.get("code_verifier")).toBeTruthy();
  });

  it("signs in with the OIDC provider's ID token (signInWithIdToken), its audience and signature checked", async () => {
    const browser = () =>
      createClient(server.url, server.anonKey, {
        auth: { persistSession: false, autoRefreshToken: false, storage: memoryStorage() },
      });
    const claims = { sub: "o-idt", email: "ida@example.test", email_verified: true, department: "Ops" };
    const refusals = [
      await oidc.sign({ ...claims, aud: "another-client" }),
      await oidc.sign(claims, { key: oidc.otherKey }),
    ];
    for (const token of refusals) {
      const refused = await browser().auth.signInWithIdToken({ provider: "custom:acme" as never, token });
      expect(refused.error).toMatchObject({ status: 400, code: "invalid_credentials" });
    }
    expect(await identity("custom:acme", "o-idt")).toEqual([]);
    const { data, error } = await browser().auth.signInWithIdToken({
      provider: "custom:acme" as never,
      token: await oidc.sign(claims),
    });
    expect(error).toBeNull();
    expect(data.user!.email).toBe("ida@example.test");
    expect((await identity("custom:acme", "o-idt"))[0].identity_data).toMatchObject({
      custom_claims: { department: "Ops" },
    });
    const plainToken = await browser().auth.signInWithIdToken({
      provider: "custom:nosuch" as never,
      token: "x.y.z",
    });
    expect(plainToken.error).toMatchObject({ status: 400, code: "validation_failed" });
  });

  it("signs in with a plain OAuth 2.0 provider, its claims mapped from its userinfo answer", async () => {
    const created = await admin().createProvider({
      provider_type: "oauth2",
      identifier: "custom:plain",
      name: "Plain",
      client_id: "plain-client",
      client_secret: "plain-secret-4711",
      authorization_url: `${plain.url}/oauth/authorize`,
      token_url: `${plain.url}/oauth/token`,
      userinfo_url: `${plain.url}/api/me`,
      pkce_enabled: false,
      attribute_mapping: { email: "mail", user_name: "login" },
      authorization_params: { prompt: "consent" },
    } as never);
    expect(created.error).toBeNull();
    const { user, error } = await signIn("custom:plain");
    expect(error).toBeUndefined();
    expect(user!.email).toBe("pat@example.test");
    expect((await identity("custom:plain", "p-7"))[0].identity_data).toMatchObject({
      email: "pat@example.test",
      user_name: "pat",
    });
    const asked = plain.authorizeRequests.at(-1)!;
    expect(asked.searchParams.get("prompt")).toBe("consent");
    expect(asked.searchParams.get("code_challenge")).toBeNull();
  });

  it("refuses bad definitions, and a disabled or deleted provider signs nobody in", async () => {
    const bad = [
      {
        provider_type: "oidc",
        identifier: "acme2",
        name: "x",
        client_id: "c",
        client_secret: "s",
        issuer: oidc.issuer,
      },
      { provider_type: "oauth2", identifier: "custom:nourl", name: "x", client_id: "c", client_secret: "s" },
      {
        provider_type: "oauth2",
        identifier: "custom:plainhttp",
        name: "x",
        client_id: "c",
        client_secret: "s",
        authorization_url: "http://example.test/a",
        token_url: "https://example.test/t",
        userinfo_url: "https://example.test/u",
      },
      {
        provider_type: "oauth2",
        identifier: "custom:reserved",
        name: "x",
        client_id: "c",
        client_secret: "s",
        authorization_url: "https://example.test/a",
        token_url: "https://example.test/t",
        userinfo_url: "https://example.test/u",
        authorization_params: { redirect_uri: "https://evil.test" },
      },
      {
        provider_type: "oauth2",
        identifier: "custom:verified",
        name: "x",
        client_id: "c",
        client_secret: "s",
        authorization_url: "https://example.test/a",
        token_url: "https://example.test/t",
        userinfo_url: "https://example.test/u",
        attribute_mapping: { email_verified: true },
      },
      {
        provider_type: "oidc",
        identifier: "custom:acme",
        name: "again",
        client_id: "c",
        client_secret: "s",
        issuer: oidc.issuer,
      },
    ];
    for (const body of bad) {
      const res = await admin().createProvider(body as never);
      expect(res.error?.status).toBe(400);
    }
    const { rows } = await server.sql(
      "select identifier from auth.custom_oauth_providers order by identifier",
    );
    expect(rows.map((r) => r.identifier)).toEqual(["custom:acme", "custom:plain"]);

    /** What /authorize answers for `provider`: a disabled or deleted one is refused before the provider is asked. */
    const authorize = async (provider: string) => {
      const started = await createClient(server.url, server.anonKey, {
        auth: { persistSession: false, storage: memoryStorage() },
      }).auth.signInWithOAuth({ provider: provider as Provider, options: { skipBrowserRedirect: true } });
      const res = await fetch(started.data.url!, { redirect: "manual" });
      return { status: res.status, body: await res.json() };
    };
    const asked = oidc.authorizeRequests.length + plain.authorizeRequests.length;
    expect((await admin().updateProvider("custom:plain", { enabled: false } as never)).error).toBeNull();
    expect(await authorize("custom:plain")).toMatchObject({
      status: 400,
      body: { error_code: "validation_failed" },
    });
    expect((await admin().deleteProvider("custom:acme")).error).toBeNull();
    expect((await admin().getProvider("custom:acme")).error).toMatchObject({
      code: "custom_provider_not_found",
    });
    expect(await authorize("custom:acme")).toMatchObject({ status: 400 });
    expect(oidc.authorizeRequests.length + plain.authorizeRequests.length).toBe(asked);
  });
});
