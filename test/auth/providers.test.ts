import { createClient, type Provider } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";
import { follow, startFakeProvider, type FakeProvider, type FakeProviderOptions } from "./fakeProvider";
import { management } from "./helpers";
import { memoryStorage, paramsOf } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The fake providers listen on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

/**
 * One case per provider: the fake's user API in the provider's own shape, where its base URL comes from (the
 * project's `external_<name>_url` slot, or the operator's STRATA_AUTH_PROVIDER_BASE_<NAME>), and what the
 * identity must end up as.
 */
interface ProviderCase {
  /** A URL slot: the path under the fake's URL that is configured (a Keycloak realm, an Azure tenant). */
  slot?: string;
  fake: Omit<FakeProviderOptions, "clientId" | "secret">;
  sub: string;
  email: string;
  /** A claim of identity_data that shows the provider's mapping. */
  claim: Record<string, unknown>;
  /** The authorize path the provider's endpoint has. */
  authorizePath: string;
  scope?: string;
}

const CASES: Record<string, ProviderCase> = {
  github: {
    fake: {
      api: {
        "/api/v3/user": {
          id: 4711,
          login: "octo",
          name: "Octo Cat",
          avatar_url: "https://a.example.test/o.png",
        },
        "/api/v3/user/emails": [
          { email: "octo-old@example.test", primary: false, verified: false },
          { email: "Octo@Example.test", primary: true, verified: true },
        ],
      },
    },
    sub: "4711",
    email: "octo@example.test",
    claim: { user_name: "octo", preferred_username: "octo", full_name: "Octo Cat" },
    authorizePath: "/login/oauth/authorize",
    scope: "user:email",
  },
  gitlab: {
    slot: "",
    fake: {
      api: {
        "/api/v4/user": { id: 12, name: "Gil Lab", email: "gil@example.test", confirmed_at: "2024-01-01" },
        "/api/v4/user/emails": [],
      },
    },
    sub: "12",
    email: "gil@example.test",
    claim: { full_name: "Gil Lab" },
    authorizePath: "/oauth/authorize",
    scope: "read_user",
  },
  google: {
    fake: {
      idToken: {
        sub: "g-123",
        email: "gina@example.test",
        email_verified: true,
        name: "Gina",
        hd: "example.test",
      },
    },
    sub: "g-123",
    email: "gina@example.test",
    claim: { full_name: "Gina", custom_claims: { hd: "example.test" } },
    authorizePath: "/authorize",
    scope: "email profile",
  },
  azure: {
    slot: "/tenant-1",
    fake: {
      issuerPath: "/tenant-1/v2.0",
      idToken: {
        sub: "az-1",
        email: "azra@example.test",
        name: "Azra",
        preferred_username: "azra",
        tid: "t1",
      },
    },
    sub: "az-1",
    email: "azra@example.test",
    claim: {
      full_name: "Azra",
      preferred_username: "azra",
      custom_claims: { tid: "t1", email: "azra@example.test" },
    },
    authorizePath: "/tenant-1/oauth2/v2.0/authorize",
    scope: "openid",
  },
  keycloak: {
    slot: "/realms/test",
    fake: {
      api: {
        "/realms/test/protocol/openid-connect/userinfo": {
          sub: "kc-1",
          email: "kay@example.test",
          email_verified: true,
          name: "Kay",
          groups: ["a"],
        },
      },
    },
    sub: "kc-1",
    email: "kay@example.test",
    claim: { full_name: "Kay", custom_claims: { groups: ["a"] } },
    authorizePath: "/realms/test/protocol/openid-connect/auth",
  },
  discord: {
    fake: {
      api: {
        "/api/users/@me": {
          id: "d-1",
          username: "dee",
          discriminator: "0007",
          email: "dee@example.test",
          verified: true,
        },
      },
    },
    sub: "d-1",
    email: "dee@example.test",
    claim: { name: "dee#0007", custom_claims: {} },
    authorizePath: "/api/oauth2/authorize",
    scope: "email identify",
  },
  twitch: {
    fake: {
      api: {
        "/helix/users": {
          data: [{ id: "tw-1", login: "twi", display_name: "Twi", email: "twi@example.test" }],
        },
      },
    },
    sub: "tw-1",
    email: "twi@example.test",
    claim: { nickname: "Twi", full_name: "twi" },
    authorizePath: "/oauth2/authorize",
  },
  kakao: {
    fake: {
      api: {
        "/v2/user/me": {
          id: 99,
          kakao_account: {
            email: "ka@example.test",
            is_email_valid: true,
            is_email_verified: true,
            profile: { nickname: "Ka" },
          },
        },
      },
    },
    sub: "99",
    email: "ka@example.test",
    claim: { user_name: "Ka" },
    authorizePath: "/oauth/authorize",
  },
  workos: {
    slot: "",
    fake: {
      tokenExtra: {
        profile: {
          id: "wo-1",
          email: "wo@example.test",
          first_name: "Wo",
          last_name: "Kos",
          organization_id: "org-1",
        },
      },
    },
    sub: "wo-1",
    email: "wo@example.test",
    claim: { full_name: "Wo Kos", custom_claims: { organization_id: "org-1" } },
    authorizePath: "/sso/authorize",
  },
  facebook: {
    fake: {
      api: {
        "/me": { id: "fb-1", email: "fay@example.test", first_name: "Fay", last_name: "Book", name: "fay.b" },
      },
    },
    sub: "fb-1",
    email: "fay@example.test",
    claim: { slug: "fay.b", full_name: "Fay Book" },
    authorizePath: "/dialog/oauth",
  },
  apple: {
    fake: {
      idToken: { sub: "ap-1", email: "ap@privaterelay.example.test", is_private_email: "true" },
      // Apple names the user only in its first callback's form.
      formExtra: { user: JSON.stringify({ name: { firstName: "Ap", lastName: "Ple" } }) },
    },
    sub: "ap-1",
    email: "ap@privaterelay.example.test",
    claim: { custom_claims: { is_private_email: "true" }, name: "Ap Ple", full_name: "Ap Ple" },
    authorizePath: "/authorize",
    scope: "email name",
  },
  linkedin_oidc: {
    fake: {
      idToken: {
        sub: "li-1",
        email: "li@example.test",
        email_verified: "true",
        given_name: "Lin",
        family_name: "Ked",
      },
    },
    sub: "li-1",
    email: "li@example.test",
    claim: { name: "Lin Ked" },
    authorizePath: "/oauth/v2/authorization",
  },
  slack_oidc: {
    fake: {
      api: {
        "/api/openid.connect.userInfo": {
          "https://slack.com/user_id": "U1",
          "https://slack.com/team_id": "T1",
          email: "sl@example.test",
          email_verified: true,
          name: "Sla",
        },
      },
    },
    sub: "U1",
    email: "sl@example.test",
    claim: { custom_claims: { "https://slack.com/team_id": "T1" } },
    authorizePath: "/openid/connect/authorize",
  },
  slack: {
    fake: {
      api: {
        // Legacy Slack does not say whether the address is verified: taken as verified.
        "/api/openid.connect.userInfo": {
          "https://slack.com/user_id": "U2",
          "https://slack.com/team_id": "T2",
          email: "legacy-sl@example.test",
          name: "Legacy Sla",
        },
      },
    },
    sub: "U2",
    email: "legacy-sl@example.test",
    claim: { full_name: "Legacy Sla", custom_claims: { "https://slack.com/team_id": "T2" } },
    authorizePath: "/oauth/authorize",
    scope: "profile email openid",
  },
  spotify: {
    fake: { api: { "/me": { id: "sp-1", display_name: "Spot", email: "spot@example.test", images: [] } } },
    sub: "sp-1",
    email: "spot@example.test",
    claim: { full_name: "Spot" },
    authorizePath: "/authorize",
  },
  zoom: {
    fake: {
      api: {
        "/v2/users/me": {
          id: "zo-1",
          first_name: "Zo",
          last_name: "Om",
          email: "zo@example.test",
          verified: 1,
          login_type: "1",
        },
      },
    },
    sub: "zo-1",
    email: "zo@example.test",
    claim: { full_name: "Zo Om" },
    authorizePath: "/oauth/authorize",
  },
  bitbucket: {
    fake: {
      api: {
        "/2.0/user": { uuid: "{bb-1}", display_name: "Bit Bucket" },
        "/2.0/user/emails": { values: [{ email: "bb@example.test", is_primary: true, is_confirmed: true }] },
      },
    },
    sub: "{bb-1}",
    email: "bb@example.test",
    claim: { full_name: "Bit Bucket" },
    authorizePath: "/site/oauth2/authorize",
  },
  notion: {
    fake: {
      api: {
        "/v1/users/me": {
          bot: { owner: { user: { id: "no-1", name: "No Tion", person: { email: "no@example.test" } } } },
        },
      },
    },
    sub: "no-1",
    email: "no@example.test",
    claim: { full_name: "No Tion" },
    authorizePath: "/v1/oauth/authorize",
  },
  x: {
    fake: {
      api: {
        "/2/users/me": {
          data: { id: "x-1", name: "Ex", username: "ex", confirmed_email: "ex@example.test" },
        },
      },
    },
    sub: "x-1",
    email: "ex@example.test",
    claim: { user_name: "ex", profile: "https://x.com/ex" },
    authorizePath: "/i/oauth2/authorize",
    scope: "users.email tweet.read users.read offline.access",
  },
  figma: {
    fake: { api: { "/v1/me": { id: "fi-1", handle: "figgy", email: "fig@example.test" } } },
    sub: "fi-1",
    email: "fig@example.test",
    claim: { full_name: "figgy" },
    authorizePath: "/oauth",
  },
};

const clientOf = (name: string) => ({ id: `${name}-client`, secret: `${name}-secret-4711` });
const fakes: Record<string, FakeProvider> = {};
let server: TestServer;

beforeAll(async () => {
  const env: Record<string, string> = {};
  for (const [name, c] of Object.entries(CASES)) {
    const client = clientOf(name);
    fakes[name] = await startFakeProvider({ clientId: client.id, secret: client.secret, ...c.fake });
    if (c.slot === undefined) env[`STRATA_AUTH_PROVIDER_BASE_${name.toUpperCase()}`] = fakes[name].url;
  }
  server = await startTestServer(env);
});
afterAll(async () => {
  await server.stop();
  await Promise.all(Object.values(fakes).map((f) => f.close()));
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

/** The provider's slot switched on with the fake's client (and URL, for a slot that has one). */
async function enable(name: string, extra: Record<string, unknown> = {}) {
  const c = CASES[name];
  const client = clientOf(name);
  const res = await management(server, "PATCH", "/config/auth", {
    [`external_${name}_enabled`]: true,
    [`external_${name}_client_id`]: client.id,
    [`external_${name}_secret`]: client.secret,
    ...(c.slot !== undefined ? { [`external_${name}_url`]: fakes[name].url + c.slot } : {}),
    ...extra,
  });
  expect(res.status).toBe(200);
}

const DONE = "http://localhost:3000/done";

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

/** Signs in with `provider` through supabase-js and the fake: the session and the provider's tokens. */
async function signIn(
  provider: string,
  flowType: "implicit" | "pkce",
  options: { redirectTo?: string; queryParams?: Record<string, string>; scopes?: string } = {},
) {
  const browser = client(flowType);
  const started = await browser.auth.signInWithOAuth({
    provider: provider as Provider,
    options: { redirectTo: options.redirectTo ?? DONE, skipBrowserRedirect: true, ...options },
  });
  expect(started.error).toBeNull();
  const landed = await follow(started.data.url!, "http://localhost:3000/");
  const params = paramsOf(landed);
  if (flowType === "pkce") {
    expect(params.code).toBeTruthy();
    const exchanged = await browser.auth.exchangeCodeForSession(params.code);
    expect(exchanged.error).toBeNull();
    const s = exchanged.data.session!;
    return {
      landed,
      params,
      user: exchanged.data.user!,
      accessToken: s.access_token,
      providerToken: s.provider_token,
      providerRefreshToken: s.provider_refresh_token,
    };
  }
  expect(params.error_description).toBeUndefined();
  const set = await browser.auth.setSession({
    access_token: params.access_token,
    refresh_token: params.refresh_token,
  });
  expect(set.error).toBeNull();
  return {
    landed,
    params,
    user: set.data.user!,
    accessToken: params.access_token,
    providerToken: params.provider_token,
    providerRefreshToken: params.provider_refresh_token,
  };
}

const identityRow = async (provider: string, subject: string) =>
  (
    await server.sql(
      `select i.user_id, i.identity_data, i.email, u.email as user_email, u.email_confirmed_at,
              u.raw_app_meta_data
         from auth.identities i join auth.users u on u.id = i.user_id
        where i.provider = $1 and i.provider_id = $2`,
      [provider, subject],
    )
  ).rows;

describe("OAuth sign-in with each provider against a local fake of it", () => {
  it.each(Object.keys(CASES))(
    "%s: implicit flow signs the provider's user in and maps its claims",
    async (name) => {
      const c = CASES[name];
      await enable(name);
      const { user, accessToken, providerToken, providerRefreshToken, landed } = await signIn(
        name,
        "implicit",
      );
      expect(landed.startsWith(DONE)).toBe(true);
      expect(user.email).toBe(c.email);
      expect(user.app_metadata).toMatchObject({ provider: name, providers: [name] });
      expect(user.identities?.map((i) => i.provider)).toEqual([name]);
      expect((decodeJwt(accessToken).amr as { method: string }[]).map((m) => m.method)).toContain("oauth");
      // The provider's own tokens come back (the fake's refresh tokens start rt-).
      expect(providerToken).toMatch(/^at-/);
      expect(providerRefreshToken).toMatch(/^rt-/);

      // The fake saw the client id, Strata's callback and the provider's scopes.
      const asked = fakes[name].authorizeRequests.at(-1)!;
      expect(asked.pathname).toBe(c.authorizePath);
      expect(asked.searchParams.get("client_id")).toBe(clientOf(name).id);
      expect(asked.searchParams.get("redirect_uri")).toBe(`${server.url}/auth/v1/callback`);
      if (c.scope) expect(asked.searchParams.get("scope")).toBe(c.scope);

      // Second channel: the identity and its user, by SQL.
      const rows = await identityRow(name, c.sub);
      expect(rows).toHaveLength(1);
      expect(rows[0].user_id).toBe(user.id);
      expect(rows[0].user_email).toBe(c.email);
      expect(rows[0].email_confirmed_at).not.toBeNull();
      expect(rows[0].email).toBe(c.email);
      expect(rows[0].identity_data).toMatchObject({ sub: c.sub, provider_id: c.sub, ...c.claim });
    },
  );
});

describe("flows, redirects and refusals", () => {
  it.each(["github", "google", "azure", "keycloak"])(
    "%s: the PKCE flow answers a code, exchanged once for the session and the provider's tokens",
    async (name) => {
      await enable(name);
      const { landed, params, user, providerToken, providerRefreshToken } = await signIn(name, "pkce");
      expect(landed.startsWith(`${DONE}?code=`)).toBe(true);
      expect(params.access_token).toBeUndefined();
      expect(user.email).toBe(CASES[name].email);
      expect(providerToken).toMatch(/^at-/);
      expect(providerRefreshToken).toMatch(/^rt-/);
      // The flow is gone once exchanged: its provider tokens with it.
      const { rows } = await server.sql(
        "select count(*)::int as n from auth.flow_state where provider_type = $1",
        [name],
      );
      expect(rows[0].n).toBe(0);
    },
  );

  it("sends the browser back only to an allowed redirect_to, else to site_url", async () => {
    await enable("github");
    await management(server, "PATCH", "/config/auth", { uri_allow_list: "https://app.example.test/**" });
    const browser = client("implicit");
    const start = await browser.auth.signInWithOAuth({
      provider: "github",
      options: { redirectTo: "https://app.example.test/after", skipBrowserRedirect: true },
    });
    expect(await follow(start.data.url!, "https://app.example.test/")).toMatch(
      /^https:\/\/app\.example\.test\/after#access_token=/,
    );
    for (const evil of [
      "https://evil.example.test/steal",
      "https://app.example.test.evil.test/x",
      "javascript:alert(1)",
    ]) {
      const s = await client("implicit").auth.signInWithOAuth({
        provider: "github",
        options: { redirectTo: evil, skipBrowserRedirect: true },
      });
      const landed = await follow(s.data.url!, "http://localhost:3000");
      expect(landed).toMatch(/^http:\/\/localhost:3000\/?#access_token=/);
    }
  });

  it("passes the caller's scopes and query parameters on, but not its own parameters", async () => {
    await enable("google");
    await signIn("google", "implicit", {
      scopes: "https://www.googleapis.com/auth/drive.readonly",
      queryParams: {
        access_type: "offline",
        prompt: "consent",
        client_id: "evil",
        redirect_uri: "https://evil.test",
      },
    });
    const asked = fakes.google.authorizeRequests.at(-1)!.searchParams;
    expect(asked.get("scope")).toBe("email profile https://www.googleapis.com/auth/drive.readonly");
    expect(asked.get("access_type")).toBe("offline");
    expect(asked.get("prompt")).toBe("consent");
    expect(asked.get("client_id")).toBe(clientOf("google").id);
    expect(asked.get("redirect_uri")).toBe(`${server.url}/auth/v1/callback`);
  });

  it("refuses a provider that is off, unknown or not configured, before any redirect", async () => {
    await management(server, "PATCH", "/config/auth", { external_discord_enabled: false });
    await management(server, "PATCH", "/config/auth", {
      external_zoom_enabled: true,
      external_zoom_client_id: "",
    });
    for (const provider of ["discord", "zoom", "myspace", "twitter", "__proto__"]) {
      const res = await fetch(`${server.url}/auth/v1/authorize?provider=${provider}`, { redirect: "manual" });
      expect(res.status).toBe(400);
      expect((await res.json()).msg).toMatch(/^Unsupported provider/);
    }
  });

  it("signs nobody in when the provider's answer does not hold: wrong secret, forged state, foreign ID token", async () => {
    const usersBefore = (await server.sql("select count(*)::int as n from auth.users")).rows[0].n;
    // The project's secret is not the provider's: the code exchange fails.
    await enable("gitlab", { external_gitlab_secret: "not-the-secret" });
    const start = await client("implicit").auth.signInWithOAuth({
      provider: "gitlab",
      options: { redirectTo: DONE, skipBrowserRedirect: true },
    });
    const landed = paramsOf(await follow(start.data.url!, "http://localhost:3000/"));
    expect(landed.error_code).toBe("bad_oauth_callback");
    expect(landed.access_token).toBeUndefined();
    await enable("gitlab");

    // A state not signed by Strata.
    const forged = await fetch(`${server.url}/auth/v1/callback?code=x&state=eyJhbGciOiJIUzI1NiJ9.e30.x`, {
      redirect: "manual",
    });
    expect(forged.status).toBe(400);
    expect((await forged.json()).error_code).toBe("bad_oauth_state");

    // An Azure tenant configured: an ID token of another issuer (the fake's root) is refused.
    await enable("azure", { external_azure_url: `${fakes.azure.url}/tenant-2` });
    const az = await client("implicit").auth.signInWithOAuth({
      provider: "azure",
      options: { redirectTo: DONE, skipBrowserRedirect: true },
    });
    expect(paramsOf(await follow(az.data.url!, "http://localhost:3000/")).error_code).toBe(
      "bad_oauth_callback",
    );
    await enable("azure");
    expect((await server.sql("select count(*)::int as n from auth.users")).rows[0].n).toBe(usersBefore);
  });

  it("takes GitHub's primary address from /user/emails, and refuses a user without one unless email_optional", async () => {
    const saved = CASES.github.fake.api!["/api/v3/user/emails"];
    const api = fakes.github.options.api!;
    try {
      api["/api/v3/user"] = { id: 5000, login: "noemail", name: "No Mail" };
      api["/api/v3/user/emails"] = [];
      await enable("github");
      const start = await client("implicit").auth.signInWithOAuth({
        provider: "github",
        options: { redirectTo: DONE, skipBrowserRedirect: true },
      });
      const refused = paramsOf(await follow(start.data.url!, "http://localhost:3000/"));
      expect(refused.error_description).toBe("Error getting user email from external provider");
      expect(await identityRow("github", "5000")).toHaveLength(0);

      await enable("github", { external_github_email_optional: true });
      const { user } = await signIn("github", "implicit");
      expect(user.email ?? "").toBe("");
      expect(await identityRow("github", "5000")).toHaveLength(1);
    } finally {
      api["/api/v3/user"] = CASES.github.fake.api!["/api/v3/user"];
      api["/api/v3/user/emails"] = saved;
      await enable("github", { external_github_email_optional: false });
    }
  });
});

describe("a project's provider URL slots under the outbound policy", () => {
  it("never exchanges a code with, or asks a user of, a private or link-local address", async () => {
    const usersBefore = (await server.sql("select count(*)::int as n from auth.users")).rows[0].n;
    for (const name of ["gitlab", "workos", "azure", "keycloak"]) {
      for (const internal of ["http://169.254.169.254/latest", "http://10.0.0.1", "http://[fd00::1]"]) {
        await enable(name, { [`external_${name}_url`]: internal });
        const started = await fetch(`${server.url}/auth/v1/authorize?provider=${name}&redirect_to=${DONE}`, {
          redirect: "manual",
        });
        expect(started.status).toBe(302);
        const authorize = new URL(started.headers.get("location")!);
        expect(authorize.origin).toBe(new URL(internal).origin);
        // The browser would go there; Strata's own requests may not.
        const back = await fetch(
          `${server.url}/auth/v1/callback?code=c&state=${encodeURIComponent(authorize.searchParams.get("state")!)}`,
          { redirect: "manual" },
        );
        expect(paramsOf(back.headers.get("location")!).error_code).toBe("bad_oauth_callback");
      }
      await enable(name);
    }
    expect((await server.sql("select count(*)::int as n from auth.users")).rows[0].n).toBe(usersBefore);
  });
});
