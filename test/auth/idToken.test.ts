import { createHash } from "node:crypto";
import { createClient } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { startFakeProvider, type FakeProvider } from "./fakeProvider";
import { management } from "./helpers";
import { memoryStorage } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The fake issuers listen on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

/**
 * signInWithIdToken (grant_type=id_token) against local issuers: each fake publishes its discovery document
 * and a JWKS with a key made by jose, and the test signs the ID tokens a mobile app would get.
 */

const ISSUERS: Record<string, { slot?: string }> = {
  google: {},
  apple: {},
  kakao: {},
  facebook: {},
  azure: { slot: "/tenant-1" },
  keycloak: { slot: "/realms/test" },
};
const clientOf = (name: string) => `${name}-client`;
const fakes: Record<string, FakeProvider> = {};
let server: TestServer;

beforeAll(async () => {
  const env: Record<string, string> = {};
  for (const [name, { slot }] of Object.entries(ISSUERS)) {
    fakes[name] = await startFakeProvider({
      clientId: clientOf(name),
      secret: "unused",
      issuerPath: slot === undefined ? undefined : name === "azure" ? `${slot}/v2.0` : slot,
    });
    if (slot === undefined) env[`STRATA_AUTH_PROVIDER_BASE_${name.toUpperCase()}`] = fakes[name].url;
  }
  server = await startTestServer(env);
  for (const [name, { slot }] of Object.entries(ISSUERS)) {
    const res = await management(server, "PATCH", "/config/auth", {
      [`external_${name}_enabled`]: true,
      [`external_${name}_client_id`]: clientOf(name),
      ...(slot !== undefined ? { [`external_${name}_url`]: fakes[name].url + slot } : {}),
    });
    expect(res.status).toBe(200);
  }
});
afterAll(async () => {
  await server.stop();
  await Promise.all(Object.values(fakes).map((f) => f.close()));
});

const client = () =>
  createClient(server.url, server.anonKey, {
    auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
  });
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const atHash = (s: string) => createHash("sha256").update(s).digest().subarray(0, 16).toString("base64url");
const countUsers = async () => (await server.sql("select count(*)::int as n from auth.users")).rows[0].n;
const identityOf = async (provider: string, sub: string) =>
  (
    await server.sql(
      `select i.user_id, i.identity_data, u.email, u.email_confirmed_at
         from auth.identities i join auth.users u on u.id = i.user_id
        where i.provider = $1 and i.provider_id = $2`,
      [provider, sub],
    )
  ).rows;

describe("signInWithIdToken", () => {
  it.each(Object.keys(ISSUERS))(
    "%s: a token of the issuer signs its user in, the same user again",
    async (name) => {
      const sub = `${name}-user-1`;
      const email = `${name}.user@example.test`;
      const nonce = `raw-nonce-${name}`;
      const claims = { sub, email, email_verified: true, name: "Ida Token", nonce: sha256(nonce) };
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) {
        const token = await fakes[name].sign(claims);
        const { data, error } = await client().auth.signInWithIdToken({ provider: name, token, nonce });
        expect(error).toBeNull();
        expect(data.user!.email).toBe(email);
        expect(data.user!.app_metadata.provider).toBe(name);
        expect(data.session!.access_token).toBeTruthy();
        ids.push(data.user!.id);
      }
      expect(ids[1]).toBe(ids[0]);
      const rows = await identityOf(name, sub);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ user_id: ids[0], email });
      expect(rows[0].email_confirmed_at).not.toBeNull();
      expect(rows[0].identity_data).toMatchObject({ sub, iss: fakes[name].issuer });
    },
  );

  it("refuses a token issued to another client, and accepts one of additional_client_ids", async () => {
    const before = await countUsers();
    const token = await fakes.google.sign({ sub: "g-aud", email: "aud@example.test", aud: "someone-else" });
    const refused = await client().auth.signInWithIdToken({ provider: "google", token });
    expect(refused.error?.message).toBe("Unacceptable audience in id_token: [someone-else]");
    expect(await countUsers()).toBe(before);

    await management(server, "PATCH", "/config/auth", {
      external_google_additional_client_ids: "ios-client, someone-else",
    });
    const accepted = await client().auth.signInWithIdToken({ provider: "google", token });
    expect(accepted.error).toBeNull();
    expect(await identityOf("google", "g-aud")).toHaveLength(1);
    await management(server, "PATCH", "/config/auth", { external_google_additional_client_ids: "" });
  });

  it("checks the nonce as the SHA-256 of the one the client sent, unless skip_nonce_check (and never Facebook's)", async () => {
    const before = await countUsers();
    const claims = { sub: "g-nonce", email: "nonce@example.test", email_verified: true };
    const withNonce = await fakes.google.sign({ ...claims, nonce: sha256("right") });
    const cases: [string, { nonce?: string; token: string }, string][] = [
      ["wrong nonce", { token: withNonce, nonce: "wrong" }, "Nonces mismatch"],
      [
        "raw nonce in the token",
        { token: await fakes.google.sign({ ...claims, nonce: "right" }), nonce: "right" },
        "Nonces mismatch",
      ],
      [
        "no nonce sent",
        { token: withNonce },
        "Passed nonce and nonce in id_token should either both exist or not.",
      ],
      [
        "nonce sent, none in the token",
        { token: await fakes.google.sign(claims), nonce: "right" },
        "Passed nonce and nonce in id_token should either both exist or not.",
      ],
    ];
    for (const [, credentials, message] of cases) {
      const { error } = await client().auth.signInWithIdToken({ provider: "google", ...credentials });
      expect(error?.message).toBe(message);
    }
    expect(await countUsers()).toBe(before);

    await management(server, "PATCH", "/config/auth", { external_google_skip_nonce_check: true });
    expect(
      (await client().auth.signInWithIdToken({ provider: "google", token: withNonce })).error,
    ).toBeNull();
    await management(server, "PATCH", "/config/auth", { external_google_skip_nonce_check: false });

    const fb = await fakes.facebook.sign({ sub: "fb-nonce", email: "fbn@example.test", nonce: "whatever" });
    expect((await client().auth.signInWithIdToken({ provider: "facebook", token: fb })).error).toBeNull();
  });

  it("refuses forged, expired, foreign and mismatched tokens with nobody signed in", async () => {
    const before = await countUsers();
    const sessionsBefore = (await server.sql("select count(*)::int as n from auth.sessions")).rows[0].n;
    const claims = { sub: "g-bad", email: "bad@example.test", email_verified: true };
    const bad: [string, string, string | undefined][] = [
      ["signed by another key", await fakes.google.sign(claims, { key: fakes.google.otherKey }), undefined],
      [
        "expired",
        await fakes.google.sign(claims, { expiresIn: Math.floor(Date.now() / 1000) - 120 }),
        undefined,
      ],
      [
        "another issuer",
        await fakes.google.sign({ ...claims, iss: "https://accounts.evil.test" }),
        undefined,
      ],
      [
        "the keycloak issuer's token as google's",
        await fakes.keycloak.sign({ ...claims, aud: clientOf("google") }),
        undefined,
      ],
      [
        "at_hash of another access token",
        await fakes.google.sign({ ...claims, at_hash: atHash("at-1") }),
        "at-2",
      ],
      ["not a JWT", "not.a.jwt", undefined],
    ];
    for (const [what, token, accessToken] of bad) {
      const { error } = await client().auth.signInWithIdToken({
        provider: "google",
        token,
        access_token: accessToken,
      });
      expect([what, error?.status, error?.message]).toEqual([what, 400, "Bad ID token"]);
    }
    expect(await countUsers()).toBe(before);
    expect((await server.sql("select count(*)::int as n from auth.sessions")).rows[0].n).toBe(sessionsBefore);

    // The matching access token passes the at_hash check.
    const good = await fakes.google.sign({ ...claims, at_hash: atHash("at-1") });
    expect(
      (await client().auth.signInWithIdToken({ provider: "google", token: good, access_token: "at-1" }))
        .error,
    ).toBeNull();
  });

  it("finds the provider by the issuer the request names (the generic OIDC slot's realm URL, Google's)", async () => {
    const token = await fakes.keycloak.sign({
      sub: "kc-by-issuer",
      email: "kci@example.test",
      email_verified: true,
    });
    const res = await fetch(`${server.url}/auth/v1/token?grant_type=id_token`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({
        id_token: token,
        issuer: fakes.keycloak.issuer,
        client_id: clientOf("keycloak"),
      }),
    });
    expect(res.status).toBe(200);
    expect(await identityOf("keycloak", "kc-by-issuer")).toHaveLength(1);
    const unknown = await fetch(`${server.url}/auth/v1/token?grant_type=id_token`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ id_token: token, issuer: "https://issuer.example.test", client_id: "x" }),
    });
    expect(unknown.status).toBe(400);
    expect((await unknown.json()).msg).toBe('Custom OIDC provider "https://issuer.example.test" not allowed');
  });

  it("refuses a provider that is off or has no ID token sign-in, and an Azure token of another tenant", async () => {
    await management(server, "PATCH", "/config/auth", { external_kakao_enabled: false });
    const kakao = await client().auth.signInWithIdToken({
      provider: "kakao",
      token: await fakes.kakao.sign({ sub: "k-off", email: "off@example.test" }),
    });
    expect(kakao.error?.code).toBe("provider_disabled");
    await management(server, "PATCH", "/config/auth", { external_kakao_enabled: true });

    const github = await client().auth.signInWithIdToken({
      provider: "github",
      token: await fakes.google.sign({ sub: "x" }),
    });
    expect(github.error?.status).toBe(400);

    const otherTenant = await fakes.azure.sign({
      sub: "az-x",
      email: "x@example.test",
      iss: `${fakes.azure.url}/tenant-2/v2.0`,
    });
    const azure = await client().auth.signInWithIdToken({ provider: "azure", token: otherTenant });
    expect(azure.error?.message).toBe("Detected ID token issuer is not an Azure ID token issuer");
    expect(await identityOf("azure", "az-x")).toHaveLength(0);
  });
});
