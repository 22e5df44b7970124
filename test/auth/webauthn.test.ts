import { readFileSync } from "node:fs";
import { createClient } from "@supabase/supabase-js";
import type { Browser, CDPSession, Page } from "playwright-core";
import { startTestServer, type TestServer } from "../helpers/server";
import { launchChromium } from "../studio/browser";
import { management } from "./helpers";

/**
 * WebAuthn MFA end to end: supabase-js (its browser bundle) in Chromium with a virtual authenticator
 * (CDP), on a page of http://localhost:<port> (a secure context; the RP id is `localhost`). Every call to
 * the auth API comes from the page, so the challenge and the verification share one client address.
 */

const BUNDLE = readFileSync(require.resolve("@supabase/supabase-js/dist/umd/supabase.js"), "utf8");

describe("WebAuthn: MFA factors and passkeys", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let cdp: CDPSession;
  let authenticatorId: string;
  let origin: string;

  /**
   * Runs `body` in the page with a fresh supabase-js client (passkeys on) signed in as `email` (signed up
   * if asked; none when `email` is null); `api` calls the auth API as that user.
   */
  const inPage = <T>(email: string | null, signUp: boolean, body: string): Promise<T> =>
    page.evaluate(
      async ([anonKey, email, signUp, body]) => {
        const w = window as any;
        const client = w.supabase.createClient(location.origin, anonKey, {
          auth: { persistSession: false, autoRefreshToken: false, experimental: { passkey: true } },
        });
        const credentials = { email, password: "Webauthn-pass-1234" };
        const signedIn =
          email === null
            ? { data: { session: null }, error: null }
            : signUp
              ? await client.auth.signUp(credentials)
              : await client.auth.signInWithPassword(credentials);
        if (signedIn.error) throw new Error(signedIn.error.message);
        const token = signedIn.data.session?.access_token;
        const api = (path: string, method: string, json?: unknown) =>
          fetch(`/auth/v1${path}`, {
            method,
            headers: {
              apikey: anonKey,
              ...(token ? { authorization: `Bearer ${token}` } : {}),
              "content-type": "application/json",
            },
            body: json === undefined ? undefined : JSON.stringify(json),
          }).then(async (r) => ({ status: r.status, body: await r.json() }));
        return new Function("client", "api", `return (async () => { ${body} })()`)(client, api);
      },
      [server.anonKey, email, signUp, body] as const,
    ) as Promise<T>;

  const factorRow = async (id: string) =>
    (
      await server.sql(
        `select status::text as status, factor_type::text as type, web_authn_aaguid,
                (web_authn_credential #>> '{authenticator,signCount}')::int as sign_count
           from auth.mfa_factors where id = $1`,
        [id],
      )
    ).rows[0];

  beforeAll(async () => {
    server = await startTestServer();
    origin = `http://localhost:${new URL(server.url).port}`;
    browser = await launchChromium();
    page = await browser.newPage();
    await page.route(`${origin}/webauthn-test/**`, (route) =>
      route.request().url().endsWith(".js")
        ? route.fulfill({ contentType: "text/javascript", body: BUNDLE })
        : route.fulfill({
            contentType: "text/html",
            body: '<!doctype html><script src="/webauthn-test/supabase.js"></script>',
          }),
    );
    await page.goto(`${origin}/webauthn-test/`);
    cdp = await page.context().newCDPSession(page);
    await cdp.send("WebAuthn.enable");
    ({ authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: {
        protocol: "ctap2",
        transport: "usb",
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
      },
    }));
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("refuses WebAuthn factors until the project enables them", async () => {
    const refused = await inPage<{ status: number; body: any }>(
      "off@example.test",
      true,
      `return api("/factors", "POST", { factor_type: "webauthn", friendly_name: "key" });`,
    );
    expect(refused).toMatchObject({ status: 422, body: { error_code: "mfa_webauthn_enroll_not_enabled" } });
    const { rows } = await server.sql(
      "select count(*)::int as n from auth.mfa_factors f join auth.users u on u.id = f.user_id where u.email = 'off@example.test'",
    );
    expect(rows[0].n).toBe(0);
  });

  it("enrolls a factor with the browser's authenticator and reaches aal2, then verifies it at sign-in", async () => {
    const patched = await management(server, "PATCH", "/config/auth", {
      mfa_web_authn_enroll_enabled: true,
      mfa_web_authn_verify_enabled: true,
      webauthn_rp_id: "localhost",
      webauthn_rp_origins: origin,
      webauthn_rp_display_name: "Strata test",
    });
    expect(patched.status).toBe(200);

    const enrolled = await inPage<{ error: unknown; aal: string; factors: any; claims: any }>(
      "wanda@example.test",
      true,
      `const reg = await client.auth.mfa.webauthn.register({ friendlyName: "laptop" });
       const factors = await client.auth.mfa.listFactors();
       const level = await client.auth.mfa.getAuthenticatorAssuranceLevel();
       return { error: reg.error && reg.error.message, aal: level.data.currentLevel, factors: factors.data,
                claims: JSON.parse(atob(reg.data.access_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))) };`,
    );
    expect(enrolled.error).toBeNull();
    expect(enrolled.aal).toBe("aal2");
    expect(enrolled.claims.amr.map((m: { method: string }) => m.method)).toContain("mfa/webauthn");
    const factorId = enrolled.factors.webauthn[0].id as string;
    expect(enrolled.factors.webauthn).toHaveLength(1);
    const row = await factorRow(factorId);
    expect(row).toMatchObject({ status: "verified", type: "webauthn" });
    const sessions = await server.sql(
      `select s.aal::text as aal, c.authentication_method from auth.sessions s
         join auth.users u on u.id = s.user_id join auth.mfa_amr_claims c on c.session_id = s.id
        where u.email = 'wanda@example.test' and c.authentication_method = 'mfa/webauthn'`,
    );
    expect(sessions.rows).toEqual([{ aal: "aal2", authentication_method: "mfa/webauthn" }]);

    // A second sign-in is aal1 until the factor verifies through an assertion; the counter grows.
    const signedIn = await inPage<{ before: string; next: string; after: string; error: unknown }>(
      "wanda@example.test",
      false,
      `const before = (await client.auth.mfa.getAuthenticatorAssuranceLevel()).data;
       const auth = await client.auth.mfa.webauthn.authenticate({ factorId: ${JSON.stringify(factorId)} });
       const after = (await client.auth.mfa.getAuthenticatorAssuranceLevel()).data;
       return { before: before.currentLevel, next: before.nextLevel, after: after.currentLevel,
                error: auth.error && auth.error.message };`,
    );
    expect(signedIn).toEqual({ before: "aal1", next: "aal2", after: "aal2", error: null });
    const counted = await factorRow(factorId);
    expect(counted.sign_count).toBeGreaterThan(row.sign_count);
    const challenges = await server.sql(
      "select count(*)::int as n from auth.mfa_challenges where factor_id = $1 and verified_at is not null",
      [factorId],
    );
    expect(challenges.rows[0].n).toBe(2);
  });

  it("refuses replayed, forged and cloned-authenticator assertions, and accepts the genuine one", async () => {
    const factorId = (
      await server.sql(
        "select f.id from auth.mfa_factors f join auth.users u on u.id = f.user_id where u.email = 'wanda@example.test'",
      )
    ).rows[0].id as string;
    const countBefore = (await factorRow(factorId)).sign_count as number;

    const outcome = await inPage<Record<string, { status: number; body: any }>>(
      "wanda@example.test",
      false,
      `const factorId = ${JSON.stringify(factorId)};
       const ceremony = async () => {
         const c = await client.auth.mfa.webauthn.challenge({ factorId });
         return { id: c.data.challengeId, response: c.data.webauthn.credential_response.toJSON() };
       };
       const verify = (challengeId, type, response) =>
         api("/factors/" + factorId + "/verify", "POST",
             { challenge_id: challengeId, webauthn: { type, credential_response: response } });
       const first = await ceremony();
       const sig = first.response.response.signature;
       const forgedSig = (sig[0] === "A" ? "B" : "A") + sig.slice(1);
       const forged = await verify(first.id, "request",
         { ...first.response, response: { ...first.response.response, signature: forgedSig } });
       const wrongType = await verify(first.id, "create", first.response);
       const genuine = await verify(first.id, "request", first.response);
       const replayedSameChallenge = await verify(first.id, "request", first.response);
       const second = await ceremony();
       const replayedNewChallenge = await verify(second.id, "request", first.response);
       const mixed = await verify(second.id, "request",
         { ...second.response, response: { ...second.response.response, clientDataJSON: first.response.response.clientDataJSON } });
       return { forged, wrongType, genuine, replayedSameChallenge, replayedNewChallenge, mixed };`,
    );
    expect(outcome.forged).toMatchObject({
      status: 400,
      body: { error_code: "webauthn_verification_failed" },
    });
    expect(outcome.wrongType).toMatchObject({
      status: 400,
      body: { error_code: "webauthn_verification_failed" },
    });
    expect(outcome.genuine.status).toBe(200);
    expect(outcome.replayedSameChallenge).toMatchObject({
      status: 422,
      body: { error_code: "mfa_challenge_expired" },
    });
    expect(outcome.replayedNewChallenge).toMatchObject({
      status: 400,
      body: { error_code: "webauthn_verification_failed" },
    });
    expect(outcome.mixed).toMatchObject({
      status: 400,
      body: { error_code: "webauthn_verification_failed" },
    });
    // Only the genuine assertion counted.
    expect((await factorRow(factorId)).sign_count).toBe(countBefore + 1);

    // A clone of the authenticator (its key with an older counter) signs validly but is refused.
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    await cdp.send("WebAuthn.clearCredentials", { authenticatorId });
    await cdp.send("WebAuthn.addCredential", {
      authenticatorId,
      credential: { ...credentials[0], rpId: "localhost", signCount: 0 },
    });
    const cloned = await inPage<{ error: string | null; aal: string }>(
      "wanda@example.test",
      false,
      `const r = await client.auth.mfa.webauthn.authenticate({ factorId: ${JSON.stringify(factorId)} });
       return { error: r.error && r.error.code, aal: (await client.auth.mfa.getAuthenticatorAssuranceLevel()).data.currentLevel };`,
    );
    expect(cloned).toEqual({ error: "webauthn_verification_failed", aal: "aal1" });
    expect((await factorRow(factorId)).sign_count).toBe(countBefore + 1);
    const aal2Sessions = await server.sql(
      `select count(*)::int as n from auth.sessions s join auth.users u on u.id = s.user_id
        where u.email = 'wanda@example.test' and s.aal = 'aal2'`,
    );
    expect(aal2Sessions.rows[0].n).toBe(3);
  });

  it("unenrolls the factor from an aal2 session only", async () => {
    const factorId = (
      await server.sql(
        "select f.id from auth.mfa_factors f join auth.users u on u.id = f.user_id where u.email = 'wanda@example.test'",
      )
    ).rows[0].id as string;
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    await cdp.send("WebAuthn.clearCredentials", { authenticatorId });
    await cdp.send("WebAuthn.addCredential", {
      authenticatorId,
      credential: { ...credentials[0], rpId: "localhost", signCount: 1000 },
    });
    const result = await inPage<{ aal1: string | null; aal2: string | null }>(
      "wanda@example.test",
      false,
      `const factorId = ${JSON.stringify(factorId)};
       const aal1 = await client.auth.mfa.unenroll({ factorId });
       await client.auth.mfa.webauthn.authenticate({ factorId });
       const aal2 = await client.auth.mfa.unenroll({ factorId });
       return { aal1: aal1.error && aal1.error.code, aal2: aal2.error && aal2.error.code };`,
    );
    expect(result).toEqual({ aal1: "insufficient_aal", aal2: null });
    expect(await factorRow(factorId)).toBeUndefined();
  });

  describe("passkeys", () => {
    const passkeyRows = async (email: string) =>
      (
        await server.sql(
          `select p.id, p.sign_count::int, p.friendly_name from auth.webauthn_credentials p
             join auth.users u on u.id = p.user_id where u.email = $1`,
          [email],
        )
      ).rows;
    const passkeySessions = async (email: string) =>
      (
        await server.sql(
          `select count(*)::int as n from auth.sessions s join auth.users u on u.id = s.user_id
             join auth.mfa_amr_claims c on c.session_id = s.id
            where u.email = $1 and c.authentication_method = 'passkey'`,
          [email],
        )
      ).rows[0].n as number;

    beforeAll(() => cdp.send("WebAuthn.clearCredentials", { authenticatorId }));

    it("are off until the project enables them", async () => {
      const off = await inPage<{ status: number; body: any }>(
        null,
        false,
        `return api("/passkeys/authentication/options", "POST", {});`,
      );
      expect(off).toMatchObject({ status: 404, body: { error_code: "passkey_disabled" } });
      expect((await management(server, "PATCH", "/config/auth", { passkey_enabled: true })).status).toBe(200);
    });

    it("registers a passkey and signs in with it, without a password", async () => {
      const registered = await inPage<{ error: string | null; name: string }>(
        "pia@example.test",
        true,
        `const r = await client.auth.registerPasskey();
         return { error: r.error && r.error.message, name: r.data && r.data.friendly_name };`,
      );
      expect(registered).toEqual({ error: null, name: "Passkey" });
      expect(await passkeyRows("pia@example.test")).toHaveLength(1);

      const signedIn = await inPage<{ error: string | null; email: string; amr: string[]; aal: string }>(
        null,
        false,
        `const r = await client.auth.signInWithPasskey();
         if (r.error) return { error: r.error.message };
         const claims = JSON.parse(atob(r.data.session.access_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
         return { error: null, email: r.data.user.email, amr: claims.amr.map((m) => m.method), aal: claims.aal };`,
      );
      expect(signedIn).toEqual({ error: null, email: "pia@example.test", amr: ["passkey"], aal: "aal1" });
      expect(await passkeySessions("pia@example.test")).toBe(1);
      expect((await passkeyRows("pia@example.test"))[0].sign_count).toBeGreaterThan(0);
    });

    it("refuses replayed assertions and an assertion claiming another user", async () => {
      const other = (await server.sql("select id from auth.users where email = 'wanda@example.test'")).rows[0]
        .id as string;
      const outcome = await inPage<Record<string, string | null>>(
        null,
        false,
        `const ceremony = async () => {
           const o = await client.auth.passkey.startAuthentication();
           const cred = await navigator.credentials.get({
             publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(o.data.options) });
           return { id: o.data.challenge_id, credential: cred.toJSON() };
         };
         const verify = async (challengeId, credential) => {
           const r = await client.auth.passkey.verifyAuthentication({ challengeId, credential });
           return r.error ? r.error.code : "ok";
         };
         const first = await ceremony();
         const otherUser = ${JSON.stringify(Buffer.from(other).toString("base64url"))};
         const second = await ceremony();
         const impersonating = await verify(second.id,
           { ...second.credential, response: { ...second.credential.response, userHandle: otherUser } });
         const genuine = await verify(first.id, first.credential);
         const replayed = await verify(first.id, first.credential);
         const third = await ceremony();
         const replayedOnNewChallenge = await verify(third.id, first.credential);
         return { impersonating, genuine, replayed, replayedOnNewChallenge };`,
      );
      expect(outcome).toEqual({
        impersonating: "webauthn_verification_failed",
        genuine: "ok",
        replayed: "webauthn_challenge_not_found",
        replayedOnNewChallenge: "webauthn_verification_failed",
      });
      expect(await passkeySessions("pia@example.test")).toBe(2);
      const wandaPasskeySessions = await passkeySessions("wanda@example.test");
      expect(wandaPasskeySessions).toBe(0);
    });

    it("lists, renames and deletes a passkey; a deleted one signs in no more", async () => {
      const managed = await inPage<{
        listed: any[];
        renamed: string | null;
        deleted: unknown;
        after: string;
      }>(
        "pia@example.test",
        false,
        `const listed = (await client.auth.passkey.list()).data;
         const renamed = (await client.auth.passkey.update({ passkeyId: listed[0].id, friendlyName: "Work key" })).data;
         const deleted = (await client.auth.passkey.delete({ passkeyId: listed[0].id })).error;
         const after = await client.auth.signInWithPasskey();
         return { listed, renamed: renamed && renamed.friendly_name, deleted, after: after.error && after.error.code };`,
      );
      expect(managed.listed).toHaveLength(1);
      expect(managed).toMatchObject({
        renamed: "Work key",
        deleted: null,
        after: "webauthn_verification_failed",
      });
      expect(await passkeyRows("pia@example.test")).toEqual([]);
    });

    it("lets the service role list and delete a user's passkeys", async () => {
      const registered = await inPage<{ error: string | null }>(
        "pia@example.test",
        false,
        `const r = await client.auth.registerPasskey(); return { error: r.error && r.error.message };`,
      );
      expect(registered.error).toBeNull();
      const userId = (await server.sql("select id from auth.users where email = 'pia@example.test'")).rows[0]
        .id as string;
      const adminOf = (key: string) =>
        createClient(server.url, key, {
          auth: { persistSession: false, autoRefreshToken: false, experimental: { passkey: true } },
        }).auth.admin.passkey;
      const admin = adminOf(server.serviceKey);
      const listed = await admin.listPasskeys({ userId });
      expect(listed.error).toBeNull();
      expect(listed.data).toEqual([expect.objectContaining({ friendly_name: "Passkey" })]);
      expect((await adminOf(server.anonKey).listPasskeys({ userId })).error).not.toBeNull();
      expect((await admin.deletePasskey({ userId, passkeyId: listed.data![0].id })).error).toBeNull();
      expect(await passkeyRows("pia@example.test")).toEqual([]);
    });
  });
});
