import { createHash } from "node:crypto";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { follow, startFakeProvider, type FakeProvider } from "./fakeProvider";
import { management } from "./helpers";
import { memoryStorage, paramsOf } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The fake providers listen on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

/** Identities: linkIdentity, unlinkIdentity, getUserIdentities, and automatic linking by verified address. */

let server: TestServer;
let github: FakeProvider;
let google: FakeProvider;

/** The GitHub account the fake signs in next. */
function githubAccount(id: number, email: string, verified = true) {
  github.options.api!["/api/v3/user"] = { id, login: `gh${id}`, name: `GH ${id}` };
  github.options.api!["/api/v3/user/emails"] = [{ email, primary: true, verified }];
}

beforeAll(async () => {
  github = await startFakeProvider({ clientId: "gh-client", secret: "gh-secret", api: {} });
  google = await startFakeProvider({
    clientId: "google-client",
    secret: "google-secret",
    idToken: { sub: "g-auto", email: "auto@example.test", email_verified: true, name: "Auto" },
  });
  server = await startTestServer({
    STRATA_AUTH_PROVIDER_BASE_GITHUB: github.url,
    STRATA_AUTH_PROVIDER_BASE_GOOGLE: google.url,
  });
  const res = await management(server, "PATCH", "/config/auth", {
    external_github_enabled: true,
    external_github_client_id: "gh-client",
    external_github_secret: "gh-secret",
    external_google_enabled: true,
    external_google_client_id: "google-client",
    external_google_secret: "google-secret",
  });
  expect(res.status).toBe(200);
});
afterAll(async () => {
  await server.stop();
  await github.close();
  await google.close();
});

const DONE = "http://localhost:3000/done";
const client = () =>
  createClient(server.url, server.anonKey, {
    auth: {
      persistSession: true,
      autoRefreshToken: false,
      detectSessionInUrl: false,
      storage: memoryStorage(),
    },
  });
const admin = () =>
  createClient(server.url, server.serviceKey, { auth: { persistSession: false, autoRefreshToken: false } });

/** A new signed-in email user. */
async function emailUser(email: string): Promise<SupabaseClient> {
  const c = client();
  const { error } = await c.auth.signUp({ email, password: "correct-horse-battery" });
  expect(error).toBeNull();
  return c;
}

const identitiesInDb = async (userId: string) =>
  (
    await server.sql(
      "select id, provider, provider_id from auth.identities where user_id = $1 order by created_at",
      [userId],
    )
  ).rows;

/** The browser of `c` sent through the provider by linkIdentity; the fragment it lands with. */
async function linkThroughProvider(c: SupabaseClient, provider: "github" | "google") {
  const started = await c.auth.linkIdentity({
    provider,
    options: { redirectTo: DONE, skipBrowserRedirect: true },
  });
  expect(started.error).toBeNull();
  return paramsOf(await follow(started.data.url!, "http://localhost:3000/"));
}

/** OAuth sign-in through the fake; the fragment the browser lands with. */
async function oauthSignIn(provider: "github" | "google") {
  const started = await client().auth.signInWithOAuth({
    provider,
    options: { redirectTo: DONE, skipBrowserRedirect: true },
  });
  return paramsOf(await follow(started.data.url!, "http://localhost:3000/"));
}

describe("manual linking", () => {
  it("is refused while security_manual_linking_enabled is off", async () => {
    const c = await emailUser("off@example.test");
    const link = await c.auth.linkIdentity({ provider: "github", options: { skipBrowserRedirect: true } });
    expect(link.error?.code).toBe("manual_linking_disabled");
    const { data } = await c.auth.getUserIdentities();
    const unlink = await c.auth.unlinkIdentity(data!.identities[0]);
    expect(unlink.error?.code).toBe("manual_linking_disabled");
    expect(await identitiesInDb((await c.auth.getUser()).data.user!.id)).toHaveLength(1);
  });

  it("links a provider's identity to the signed-in user, unlinks it, never the last one", async () => {
    await management(server, "PATCH", "/config/auth", { security_manual_linking_enabled: true });
    const c = await emailUser("linker@example.test");
    const me = (await c.auth.getUser()).data.user!;
    githubAccount(101, "linker-gh@example.test");
    const landed = await linkThroughProvider(c, "github");
    expect(landed.error_description).toBeUndefined();
    expect(landed.provider_token).toMatch(/^at-/);

    const { data } = await c.auth.getUserIdentities();
    expect(data!.identities.map((i) => i.provider).sort()).toEqual(["email", "github"]);
    const rows = await identitiesInDb(me.id);
    expect(rows.map((r) => [r.provider, r.provider_id])).toEqual([
      ["email", me.id],
      ["github", "101"],
    ]);
    const user = (await server.sql("select email, raw_app_meta_data from auth.users where id = $1", [me.id]))
      .rows[0];
    expect(user.email).toBe("linker@example.test");
    expect(user.raw_app_meta_data).toMatchObject({ provider: "email", providers: ["email", "github"] });

    // Signing in with GitHub now signs this user in.
    const signedIn = await oauthSignIn("github");
    expect(JSON.parse(Buffer.from(signedIn.access_token.split(".")[1], "base64url").toString()).sub).toBe(
      me.id,
    );

    // The same identity again: refused, for this user and for another.
    expect((await linkThroughProvider(c, "github")).error_description).toBe("Identity is already linked");
    const other = await emailUser("other@example.test");
    expect((await linkThroughProvider(other, "github")).error_description).toBe(
      "Identity is already linked to another user",
    );
    expect(await identitiesInDb(me.id)).toHaveLength(2);

    // Unlinking: another user's identity is not found, a non-UUID is 404, the last one stays.
    const otherIdentity = (await other.auth.getUserIdentities()).data!.identities[0];
    expect((await c.auth.unlinkIdentity(otherIdentity)).error?.code).toBe("identity_not_found");
    expect((await c.auth.unlinkIdentity({ ...otherIdentity, identity_id: "not-a-uuid" })).error?.status).toBe(
      404,
    );
    const gh = data!.identities.find((i) => i.provider === "github")!;
    expect((await c.auth.unlinkIdentity(gh)).error).toBeNull();
    expect((await identitiesInDb(me.id)).map((r) => r.provider)).toEqual(["email"]);
    const after = (await server.sql("select raw_app_meta_data from auth.users where id = $1", [me.id]))
      .rows[0];
    expect(after.raw_app_meta_data.providers).toEqual(["email"]);
    const last = (await c.auth.getUserIdentities()).data!.identities[0];
    const refused = await c.auth.unlinkIdentity(last);
    expect(refused.error?.code).toBe("single_identity_not_deletable");
    expect(await identitiesInDb(me.id)).toHaveLength(1);
    expect(await identitiesInDb((await other.auth.getUser()).data.user!.id)).toHaveLength(1);
  });

  it("links an ID token's identity with linkIdentity({ token })", async () => {
    const c = await emailUser("token-linker@example.test");
    const me = (await c.auth.getUser()).data.user!;
    const nonce = "link-nonce";
    const token = await google.sign({
      sub: "g-linked",
      email: "token-linker@gmail.example.test",
      email_verified: true,
      nonce: createHash("sha256").update(nonce).digest("hex"),
    });
    const { data, error } = await c.auth.linkIdentity({ provider: "google", token, nonce });
    expect(error).toBeNull();
    expect(data.user!.id).toBe(me.id);
    expect((await identitiesInDb(me.id)).map((r) => r.provider)).toEqual(["email", "google"]);
    // Without a session it is not a link: auth-js sends no user, Strata refuses.
    const res = await fetch(`${server.url}/auth/v1/token?grant_type=id_token`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ provider: "google", id_token: token, nonce, link_identity: true }),
    });
    expect(res.status).toBe(401);
  });
});

describe("automatic linking by address", () => {
  it("links a verified address to the user who has it, and takes over nothing with an unverified one", async () => {
    const c = await emailUser("auto@example.test");
    const me = (await c.auth.getUser()).data.user!;
    // Google vouches for the address: the same user, now with both identities.
    const landed = await oauthSignIn("google");
    expect(landed.access_token).toBeTruthy();
    expect((await identitiesInDb(me.id)).map((r) => r.provider)).toEqual(["email", "google"]);

    // GitHub does not vouch for it: a user of its own, without the address, not signed in.
    await management(server, "PATCH", "/config/auth", { mailer_autoconfirm: false });
    try {
      githubAccount(202, "auto@example.test", false);
      const refused = await oauthSignIn("github");
      expect(refused.error_code).toBe("provider_email_needs_verification");
      const { rows } = await server.sql(
        "select i.user_id, u.email from auth.identities i join auth.users u on u.id = i.user_id where provider = 'github' and provider_id = '202'",
      );
      expect(rows).toHaveLength(1);
      expect(rows[0].user_id).not.toBe(me.id);
      expect(rows[0].email).toBeNull();
      expect(await identitiesInDb(me.id)).toHaveLength(2);
    } finally {
      await management(server, "PATCH", "/config/auth", { mailer_autoconfirm: true });
    }
  });

  it("a verified sign-in to an unconfirmed account drops the password someone else may have set", async () => {
    // Someone signs up with the victim's address and a password, never confirmed.
    const created = await admin().auth.admin.createUser({
      email: "victim@example.test",
      password: "attacker-password",
      email_confirm: false,
    });
    expect(created.error).toBeNull();
    await management(server, "PATCH", "/config/auth", { mailer_autoconfirm: false });
    try {
      githubAccount(303, "victim@example.test", true);
      const landed = await oauthSignIn("github");
      expect(landed.access_token).toBeTruthy();
    } finally {
      await management(server, "PATCH", "/config/auth", { mailer_autoconfirm: true });
    }
    const { rows } = await server.sql(
      "select encrypted_password, email_confirmed_at from auth.users where id = $1",
      [created.data.user!.id],
    );
    expect(rows[0].encrypted_password ?? "").toBe("");
    expect(rows[0].email_confirmed_at).not.toBeNull();
    expect((await identitiesInDb(created.data.user!.id)).map((r) => r.provider)).toEqual(["github"]);
    const attacker = await client().auth.signInWithPassword({
      email: "victim@example.test",
      password: "attacker-password",
    });
    expect(attacker.error?.code).toBe("invalid_credentials");
  });
});
