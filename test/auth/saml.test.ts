import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import * as samlify from "samlify";
import { generate } from "selfsigned";
import { loadKek } from "../../src/platform/kek";
import { startTestServer, TEST_KEK, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage, paramsOf } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The metadata host listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

const { binding } = samlify.Constants.namespace;
const PERSISTENT = "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent";
const IDP_ENTITY = "https://idp.example.test/saml/metadata";
const SITE = "http://localhost:3000";

const AUTHN_STATEMENT =
  '<saml:AuthnStatement AuthnInstant="{AuthnInstant}" SessionNotOnOrAfter="{SessionNotOnOrAfter}" SessionIndex="{SessionIndex}">' +
  "<saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>";

interface Account {
  subject: string;
  mail: string;
  displayName: string;
  groups: string[];
}

/** Where and how a browser posts an identity provider's answer. */
interface Answer {
  acs: string;
  SAMLResponse: string;
  RelayState: string;
}

/**
 * A SAML identity provider built with samlify, the library Strata uses as service provider: its own key and
 * certificate made here, an HTTP-Redirect sign-on service, signed assertions with attributes.
 */
async function makeIdentityProvider(entityID = IDP_ENTITY, options: { encrypt?: boolean } = {}) {
  const pems = await generate([{ name: "commonName", value: "idp.example.test" }], {
    keySize: 2048,
    algorithm: "sha256",
  });
  const attributes = ["mail", "displayName", "groups"].map((name) => ({
    name,
    valueTag: name,
    nameFormat: "urn:oasis:names:tc:SAML:2.0:attrname-format:basic",
    valueXsiType: "xs:string",
  }));
  const idp = samlify.IdentityProvider({
    entityID,
    privateKey: pems.private,
    signingCert: pems.cert,
    wantAuthnRequestsSigned: true,
    // The service provider's logout messages must be signed.
    wantLogoutRequestSigned: true,
    wantLogoutResponseSigned: true,
    isAssertionEncrypted: Boolean(options.encrypt),
    nameIDFormat: [PERSISTENT],
    singleSignOnService: [{ Binding: binding.redirect, Location: "https://idp.example.test/saml/sso" }],
    singleLogoutService: [{ Binding: binding.redirect, Location: "https://idp.example.test/saml/slo" }],
    loginResponseTemplate: {
      context: samlify.SamlLib.defaultLoginResponseTemplate.context,
      attributes,
    },
  });

  /** The signed answer for `account` to the request in `url` (unsolicited when `url` is a plain ACS URL). */
  async function answer(
    sp: ReturnType<typeof samlify.ServiceProvider>,
    url: string,
    account: Account,
    sessionNotOnOrAfter?: string,
  ): Promise<Answer> {
    const parsed = new URL(url);
    let inResponseTo = "";
    if (parsed.searchParams.has("SAMLRequest")) {
      // The request's signature covers the query as sent, without the signature itself.
      const octetString = parsed.search
        .slice(1)
        .split("&")
        .filter((part) => !part.startsWith("Signature="))
        .join("&");
      const request = await idp.parseLoginRequest(sp, "redirect", {
        query: Object.fromEntries(parsed.searchParams),
        octetString,
      });
      inResponseTo = String(request.extract.request?.id);
    }
    const now = new Date();
    const later = new Date(now.getTime() + 5 * 60_000).toISOString();
    const acs = sp.entityMeta.getAssertionConsumerService("post") as string;
    const response = await idp.createLoginResponse(
      sp,
      { extract: { request: { id: inResponseTo } } },
      "post",
      {},
      (template: string) => ({
        id: "",
        context: samlify.SamlLib.replaceTagsByValue(template.replace("{AuthnStatement}", AUTHN_STATEMENT), {
          ID: `_${randomUUID()}`,
          AssertionID: `_${randomUUID()}`,
          Destination: acs,
          Audience: sp.entityMeta.getEntityID(),
          SubjectRecipient: acs,
          Issuer: entityID,
          IssueInstant: now.toISOString(),
          StatusCode: "urn:oasis:names:tc:SAML:2.0:status:Success",
          ConditionsNotBefore: now.toISOString(),
          ConditionsNotOnOrAfter: later,
          SubjectConfirmationDataNotOnOrAfter: later,
          NameIDFormat: PERSISTENT,
          NameID: account.subject,
          InResponseTo: inResponseTo || undefined,
          AuthnInstant: now.toISOString(),
          SessionNotOnOrAfter: sessionNotOnOrAfter,
          SessionIndex: `_${randomUUID()}`,
          attrMail: account.mail,
          attrDisplayName: account.displayName,
          attrGroups: account.groups.join(","),
        }),
      }),
    );
    return {
      acs,
      SAMLResponse: response.context,
      RelayState: parsed.searchParams.get("RelayState") ?? "",
    };
  }
  return { idp, answer };
}

/** The browser posting an answer to the ACS: where Strata sends it next. */
async function post(answer: Answer): Promise<{ status: number; location: string }> {
  const res = await fetch(answer.acs, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      SAMLResponse: answer.SAMLResponse,
      RelayState: answer.RelayState,
    }).toString(),
  });
  return { status: res.status, location: res.headers.get("location") ?? "" };
}

describe("SAML single sign-on through providers registered with the Management API", () => {
  let server: TestServer;
  let provider: Awaited<ReturnType<typeof makeIdentityProvider>>;
  let sp: ReturnType<typeof samlify.ServiceProvider>;
  let providerId: string;
  const ada: Account = {
    subject: "ada-7f3e",
    mail: "Ada@Example.com",
    displayName: "Ada Lovelace",
    groups: ["admins"],
  };
  const client = (flowType: "pkce" | "implicit") =>
    createClient(server.url, server.anonKey, {
      auth: { flowType, persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });

  beforeAll(async () => {
    server = await startTestServer();
    provider = await makeIdentityProvider();
  });
  afterAll(() => server.stop());

  it("registers the provider; SSO answers only once SAML is enabled; the SP metadata serves a sealed key's certificate", async () => {
    const created = await management(server, "POST", "/config/auth/sso/providers", {
      type: "saml",
      metadata_xml: provider.idp.getMetadata(),
      domains: ["example.com"],
      attribute_mapping: {
        keys: {
          email: { name: "mail" },
          name: { names: ["cn", "displayName"] },
          groups: { name: "groups", array: true },
          department: { name: "department", default: "research" },
        },
      },
    });
    expect(created.status).toBe(201);
    expect(created.body.saml.entity_id).toBe(IDP_ENTITY);
    providerId = created.body.id;

    const off = await client("pkce").auth.signInWithSSO({ domain: "example.com" });
    expect(off.error).toMatchObject({ status: 404, code: "saml_provider_disabled" });

    const patched = await management(server, "PATCH", "/config/auth", {
      saml_enabled: true,
      site_url: SITE,
      uri_allow_list: `${SITE}/**`,
    });
    expect(patched.status).toBe(200);

    // The metadata needs no API key (identity providers fetch it); it names the ACS and the signing cert.
    const res = await fetch(`${server.url}/auth/v1/sso/saml/metadata`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/application\/xml/);
    const xml = await res.text();
    expect(xml).toContain(`entityID="${server.url}/auth/v1/sso/saml/metadata"`);
    expect(xml).toContain(`Location="${server.url}/auth/v1/sso/saml/acs"`);
    expect(xml).not.toMatch(/PRIVATE KEY/);
    sp = samlify.ServiceProvider({ metadata: xml });

    // At rest the SP key pair is sealed with the key-encryption key; the certificate opens to the published one.
    const { rows } = await server.controlSql(
      "select private_key, certificate from platform.saml_sp_keys where project_ref = $1",
      [server.ref],
    );
    expect(rows[0].private_key).toMatch(/^kek1:/);
    expect(rows[0].certificate).toMatch(/^kek1:/);
    const kek = loadKek("", TEST_KEK);
    expect(kek.open(rows[0].private_key, "platform.saml_sp_keys.private_key")).toMatch(
      /BEGIN (RSA )?PRIVATE KEY/,
    );
    const cert = kek.open(rows[0].certificate, "platform.saml_sp_keys.certificate");
    const body = cert.replace(/-----[^-]+-----|\s/g, "");
    expect(xml.replace(/\s/g, "")).toContain(body);
  });

  it("signs in with PKCE: signed AuthnRequest, signed assertion, the provider's attribute mapping, one SSO user", async () => {
    // A password user of the same address stays a separate account: SSO users link only to their provider.
    const password = await client("implicit").auth.signUp({
      email: "ada@example.com",
      password: "pw-ada-12345",
    });
    expect(password.error).toBeNull();

    const browser = client("pkce");
    const started = await browser.auth.signInWithSSO({
      domain: "example.com",
      options: { redirectTo: `${SITE}/welcome` },
    });
    expect(started.error).toBeNull();
    expect(started.data!.url.startsWith("https://idp.example.test/saml/sso?SAMLRequest=")).toBe(true);
    // The AuthnRequest is signed (the identity provider verifies it with the metadata's certificate).
    expect(new URL(started.data!.url).searchParams.get("SigAlg")).toBe(
      "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256",
    );
    const landed = await post(await provider.answer(sp, started.data!.url, ada));
    expect(landed.status).toBe(302);
    expect(landed.location.startsWith(`${SITE}/welcome?code=`)).toBe(true);

    const exchanged = await browser.auth.exchangeCodeForSession(
      new URL(landed.location).searchParams.get("code")!,
    );
    expect(exchanged.error).toBeNull();
    const { user, session } = exchanged.data;
    expect(user).toMatchObject({
      email: "ada@example.com",
      app_metadata: { provider: `sso:${providerId}`, providers: [`sso:${providerId}`] },
      user_metadata: {
        iss: IDP_ENTITY,
        sub: ada.subject,
        name: "Ada Lovelace",
        custom_claims: { groups: ["admins"], department: "research" },
      },
    });
    expect(user!.id).not.toBe(password.data.user!.id);
    const claims = decodeJwt(session!.access_token) as { amr: { method: string }[] };
    expect(claims.amr.map((m) => m.method)).toEqual(["sso/saml"]);

    const users = await server.sql(
      "select id, email, is_sso_user, email_confirmed_at is not null as confirmed from auth.users where email = $1 order by is_sso_user",
      ["ada@example.com"],
    );
    expect(users.rows).toEqual([
      { id: password.data.user!.id, email: "ada@example.com", is_sso_user: false, confirmed: true },
      { id: user!.id, email: "ada@example.com", is_sso_user: true, confirmed: true },
    ]);
    const identities = await server.sql(
      "select provider, provider_id, identity_data from auth.identities where user_id = $1",
      [user!.id],
    );
    expect(identities.rows).toEqual([
      {
        provider: `sso:${providerId}`,
        provider_id: ada.subject,
        identity_data: {
          iss: IDP_ENTITY,
          sub: ada.subject,
          email: "ada@example.com",
          email_verified: true,
          name: "Ada Lovelace",
          custom_claims: { groups: ["admins"], department: "research" },
        },
      },
    ]);
    // The relay state was used once.
    expect((await server.sql("select count(*)::int as n from auth.saml_relay_states")).rows[0].n).toBe(0);

    // The password user still signs in with the password, as the other account.
    const signedIn = await client("implicit").auth.signInWithPassword({
      email: "ada@example.com",
      password: "pw-ada-12345",
    });
    expect(signedIn.data.user?.id).toBe(password.data.user!.id);
  });

  it("signs in the implicit way by provider id: the same user, claims updated; a replayed or forged answer signs no one in", async () => {
    const browser = client("implicit");
    const started = await browser.auth.signInWithSSO({
      providerId,
      options: { redirectTo: `${SITE}/welcome` },
    });
    expect(started.error).toBeNull();
    const sessionEnd = new Date(Date.now() + 3600_000);
    sessionEnd.setMilliseconds(0);
    const answer = await provider.answer(
      sp,
      started.data!.url,
      { ...ada, displayName: "Countess Ada" },
      sessionEnd.toISOString(),
    );
    const landed = await post(answer);
    expect(landed.status).toBe(302);
    const params = paramsOf(landed.location);
    expect(landed.location.startsWith(`${SITE}/welcome#`)).toBe(true);
    const set = await browser.auth.setSession({
      access_token: params.access_token,
      refresh_token: params.refresh_token,
    });
    expect(set.error).toBeNull();
    expect(set.data.user!.user_metadata.name).toBe("Countess Ada");
    const ssoUsers = await server.sql("select id from auth.users where is_sso_user");
    expect(ssoUsers.rows).toEqual([{ id: set.data.user!.id }]);

    // The provider's SessionNotOnOrAfter ends the session: past it, a refresh is refused.
    const sessionId = (decodeJwt(params.access_token) as { session_id: string }).session_id;
    const stored = await server.sql("select not_after, sso_provider_id from auth.sessions where id = $1", [
      sessionId,
    ]);
    expect(stored.rows).toEqual([{ not_after: sessionEnd, sso_provider_id: providerId }]);
    await server.sql("update auth.sessions set not_after = now() - interval '1 second' where id = $1", [
      sessionId,
    ]);
    const refreshed = await browser.auth.refreshSession();
    expect(refreshed.error).toMatchObject({ status: 400, code: "session_expired" });

    // The same answer again: its relay state is gone.
    const replay = await post(answer);
    expect(replay.status).toBe(303);
    expect(new URL(replay.location).searchParams.get("error_code")).toBe("saml_relay_state_not_found");

    // An answer signed by another key for the registered issuer: refused, nothing written.
    const impostor = await makeIdentityProvider(IDP_ENTITY);
    const next = await client("implicit").auth.signInWithSSO({ domain: "example.com" });
    const forged = await post(
      await impostor.answer(sp, next.data!.url, { ...ada, subject: "mallory", mail: "mallory@example.com" }),
    );
    expect(forged.status).toBe(303);
    const forgedUrl = new URL(forged.location);
    expect(forgedUrl.origin + forgedUrl.pathname).toBe(`${SITE}/`);
    expect(forgedUrl.searchParams.get("error_code")).toBe("validation_failed");
    expect(
      (await server.sql("select count(*)::int as n from auth.users where email = 'mallory@example.com'"))
        .rows[0].n,
    ).toBe(0);

    // An answer to another request than the one this relay state started.
    const first = await client("implicit").auth.signInWithSSO({ domain: "example.com" });
    const second = await client("implicit").auth.signInWithSSO({ domain: "example.com" });
    const mixed = await provider.answer(sp, first.data!.url, ada);
    mixed.RelayState = new URL(second.data!.url).searchParams.get("RelayState")!;
    const refused = await post(mixed);
    expect(new URL(refused.location).searchParams.get("error_code")).toBe("validation_failed");
  });

  it("takes an answer the identity provider starts (no request): the relay state is where to go", async () => {
    const acs = `${server.url}/auth/v1/sso/saml/acs`;
    const unsolicited = await provider.answer(
      sp,
      `${acs}?RelayState=${encodeURIComponent(`${SITE}/from-idp`)}`,
      ada,
    );
    expect(Buffer.from(unsolicited.SAMLResponse, "base64").toString()).not.toContain("InResponseTo");
    const landed = await post(unsolicited);
    expect(landed.status).toBe(302);
    expect(landed.location.startsWith(`${SITE}/from-idp#`)).toBe(true);
    const claims = decodeJwt(paramsOf(landed.location).access_token) as { sub: string };
    const ssoUser = await server.sql(
      "select id from auth.users where is_sso_user and email = 'ada@example.com'",
    );
    expect(claims.sub).toBe(ssoUser.rows[0].id);
    // An unsolicited answer for a provider nobody registered.
    const stranger = await makeIdentityProvider("https://stranger.example.test/metadata");
    const refused = await post(await stranger.answer(sp, acs, ada));
    expect(new URL(refused.location).searchParams.get("error_code")).toBe("saml_idp_not_found");
  });

  it("takes an answer the identity provider starts only once: a replay within its validity signs no one in", async () => {
    const acs = `${server.url}/auth/v1/sso/saml/acs`;
    const unsolicited = await provider.answer(sp, `${acs}?RelayState=${encodeURIComponent(SITE)}`, ada);
    const sessions = async () =>
      Number(
        (
          await server.sql(
            "select count(*)::int as n from auth.sessions s join auth.users u on u.id = s.user_id where u.email = 'ada@example.com'",
          )
        ).rows[0].n,
      );
    // A row of another answer whose validity ended long ago: swept by the next use.
    const ref = (await server.controlSql("select ref from platform.projects limit 1")).rows[0].ref;
    await server.controlSql(
      `insert into platform.saml_consumed_ids (project_ref, kind, id, expires_at)
       values ($1, 'assertion', '_long-gone', now() - interval '1 day')`,
      [ref],
    );
    const first = await post(unsolicited);
    expect(first.status).toBe(302);
    expect(paramsOf(first.location).access_token).toBeTruthy();
    const before = await sessions();
    const xml = Buffer.from(unsolicited.SAMLResponse, "base64").toString();
    const assertionId = /<saml:Assertion[^>]*\bID="([^"]+)"/.exec(xml)![1];
    const responseId = /<samlp:Response[^>]*\bID="([^"]+)"/.exec(xml)![1];
    const recorded = await server.controlSql(
      `select kind, id, expires_at > now() + interval '4 minutes' as kept
         from platform.saml_consumed_ids where project_ref = $1 and id = any($2) order by kind`,
      [ref, [assertionId, responseId, "_long-gone"]],
    );
    expect(recorded.rows.map((r) => [r.kind, r.id])).toEqual([
      ["assertion", assertionId],
      ["response", responseId],
    ]);
    expect(recorded.rows.every((r) => r.kept)).toBe(true);
    // The same answer again, as an attacker who captured it would post it.
    const replay = await post(unsolicited);
    expect(replay.status).toBe(303);
    const error = new URL(replay.location).searchParams;
    expect(replay.location.startsWith(SITE)).toBe(true);
    expect(error.get("error_code")).toBe("validation_failed");
    expect(error.get("error_description")).toBe("SAML Assertion is not valid: it has already been used");
    expect(replay.location).not.toContain("access_token");
    expect(await sessions()).toBe(before);
    // A fresh answer for the same user still signs in.
    const again = await post(await provider.answer(sp, acs, ada));
    expect(again.status).toBe(302);
    expect(await sessions()).toBe(before + 1);
  });

  it("single logout: the service provider's ends the SSO session; the identity provider's ends the user's SSO sessions", async () => {
    const acs = `${server.url}/auth/v1/sso/saml/acs`;
    const signIn = async () => paramsOf((await post(await provider.answer(sp, acs, ada))).location);
    const ssoSessions = async () =>
      (
        await server.sql(
          `select s.id::text from auth.sessions s join auth.users u on u.id = s.user_id
            where u.email = 'ada@example.com' and u.is_sso_user and s.sso_provider_id = $1 order by s.created_at`,
          [providerId],
        )
      ).rows.map((r) => r.id as string);
    await server.sql("delete from auth.sessions where sso_provider_id = $1", [providerId]);
    const first = await signIn();
    const second = await signIn();
    const [firstSession, secondSession] = await ssoSessions();
    expect(decodeJwt(first.access_token).session_id).toBe(firstSession);

    // SP-initiated: the session ends at once; the browser goes to the provider with a signed LogoutRequest.
    const started = await fetch(`${server.url}/auth/v1/sso/saml/logout`, {
      method: "POST",
      headers: {
        apikey: server.anonKey,
        authorization: `Bearer ${first.access_token}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ redirect_to: `${SITE}/bye` }),
    });
    expect(started.status).toBe(200);
    const { url } = (await started.json()) as { url: string };
    expect(url.startsWith("https://idp.example.test/saml/slo?SAMLRequest=")).toBe(true);
    expect(await ssoSessions()).toEqual([secondSession]);
    const query = new URL(url);
    const octetString = query.search
      .slice(1)
      .split("&")
      .filter((part) => !part.startsWith("Signature="))
      .join("&");
    const logoutRequest = await provider.idp.parseLogoutRequest(sp, "redirect", {
      query: Object.fromEntries(query.searchParams),
      octetString,
    });
    expect(logoutRequest.extract.nameID).toBe(ada.subject);
    // The provider answers; the browser lands where the sign-out asked.
    const spSigned = samlify.ServiceProvider({
      metadata: sp.getMetadata(),
      wantLogoutRequestSigned: true,
      wantLogoutResponseSigned: true,
    });
    const answered = provider.idp.createLogoutResponse(
      spSigned,
      { extract: logoutRequest.extract },
      "redirect",
      query.searchParams.get("RelayState") ?? "",
    );
    const back = await fetch(answered.context, { redirect: "manual" });
    expect(back.status).toBe(303);
    expect(back.headers.get("location")).toBe(`${SITE}/bye`);

    // IdP-initiated: a forged (unsigned) LogoutRequest ends nothing; the provider's signed one ends the rest.
    const unsigned = provider.idp.createLogoutRequest(sp, "redirect", { logoutNameID: ada.subject });
    const forged = await fetch(unsigned.context, { redirect: "manual" });
    expect(forged.status).toBe(400);
    // One signed with another key under the provider's entity id ends nothing either.
    const impostor = await makeIdentityProvider(IDP_ENTITY);
    const impostorSigned = impostor.idp.createLogoutRequest(spSigned, "redirect", {
      logoutNameID: ada.subject,
    });
    expect((await fetch(impostorSigned.context, { redirect: "manual" })).status).toBe(400);
    expect(await ssoSessions()).toEqual([secondSession]);
    const signed = provider.idp.createLogoutRequest(spSigned, "redirect", { logoutNameID: ada.subject });
    expect(signed.context.startsWith(`${server.url}/auth/v1/sso/saml/slo?SAMLRequest=`)).toBe(true);
    const ended = await fetch(signed.context, { redirect: "manual" });
    expect(ended.status).toBe(302);
    const response = new URL(ended.headers.get("location")!);
    expect(response.href.startsWith("https://idp.example.test/saml/slo?SAMLResponse=")).toBe(true);
    expect(response.searchParams.get("Signature")).toBeTruthy();
    expect(await ssoSessions()).toEqual([]);
    // The same signed LogoutRequest replayed later ends nothing more: a new sign-in stays.
    await signIn();
    const kept = await ssoSessions();
    expect(kept).toHaveLength(1);
    expect((await fetch(signed.context, { redirect: "manual" })).status).toBe(400);
    expect(await ssoSessions()).toEqual(kept);
    // The ended sessions' refresh tokens refresh nothing.
    const refreshed = await fetch(`${server.url}/auth/v1/token?grant_type=refresh_token`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ refresh_token: second.refresh_token }),
    });
    expect(refreshed.status).toBe(400);
  });

  it("takes encrypted assertions only while saml_allow_encrypted_assertions is on", async () => {
    const secure = await makeIdentityProvider("https://secure-idp.example.test/metadata", { encrypt: true });
    const created = await management(server, "POST", "/config/auth/sso/providers", {
      type: "saml",
      metadata_xml: secure.idp.getMetadata(),
      domains: ["secure.example"],
    });
    expect(created.status).toBe(201);
    const metadata = async () => (await fetch(`${server.url}/auth/v1/sso/saml/metadata`)).text();
    expect(await metadata()).not.toContain('use="encryption"');
    // The Management API only reads this field (as the platform's): the operator sets it in the control plane.
    const allowEncrypted = (on: boolean) =>
      server.controlSql(
        `update platform.auth_config set config = config || jsonb_build_object('saml_allow_encrypted_assertions', $2::boolean)
          where project_ref = $1`,
        [server.ref, on],
      );
    expect(
      (await management(server, "PATCH", "/config/auth", { saml_allow_encrypted_assertions: true })).status,
    ).toBe(400);
    await allowEncrypted(true);
    expect((await management(server, "GET", "/config/auth")).body.saml_allow_encrypted_assertions).toBe(true);
    const xml = await metadata();
    expect(xml).toContain('use="encryption"');
    const spWithEncryption = samlify.ServiceProvider({ metadata: xml });
    const grace: Account = {
      subject: "grace-1",
      mail: "grace@secure.example",
      displayName: "Grace",
      groups: [],
    };

    const started = await client("implicit").auth.signInWithSSO({ domain: "secure.example" });
    const answer = await secure.answer(spWithEncryption, started.data!.url, grace);
    expect(Buffer.from(answer.SAMLResponse, "base64").toString()).toContain("EncryptedAssertion");
    const landed = await post(answer);
    expect(landed.status).toBe(302);
    expect(paramsOf(landed.location).access_token).toBeTruthy();
    const users = await server.sql("select email, is_sso_user from auth.users where email = $1", [
      grace.mail,
    ]);
    expect(users.rows).toEqual([{ email: grace.mail, is_sso_user: true }]);

    await allowEncrypted(false);
    const again = await client("implicit").auth.signInWithSSO({ domain: "secure.example" });
    const refused = await post(await secure.answer(spWithEncryption, again.data!.url, grace));
    expect(refused.status).toBe(303);
    expect(new URL(refused.location).searchParams.get("error_description")).toMatch(/encrypted assertions/);
  });

  it("registers a provider from its metadata URL; refuses metadata that is no usable identity provider", async () => {
    const other = await makeIdentityProvider("https://other-idp.example.test/metadata");
    const host = http.createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/xml" });
      res.end(other.idp.getMetadata());
    });
    await new Promise<void>((resolve) => host.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(host.address() as AddressInfo).port}/metadata`;
      const created = await management(server, "POST", "/config/auth/sso/providers", {
        type: "saml",
        metadata_url: url,
        domains: ["other.example"],
      });
      expect(created.status).toBe(201);
      expect(created.body.saml).toMatchObject({
        entity_id: "https://other-idp.example.test/metadata",
        metadata_url: url,
      });
      expect(created.body.saml.metadata_xml).toContain("IDPSSODescriptor");
      // New metadata of another entity is not this provider's.
      const swapped = await management(server, "PUT", `/config/auth/sso/providers/${created.body.id}`, {
        metadata_xml: provider.idp.getMetadata(),
      });
      expect(swapped.status).toBe(400);
    } finally {
      await new Promise<void>((resolve) => host.close(() => resolve()));
    }
    const before = await management(server, "GET", "/config/auth/sso/providers");
    const refused = [
      { metadata_xml: "<not-metadata/>" },
      { metadata_xml: provider.idp.getMetadata().replace(/HTTP-Redirect/g, "HTTP-POST") },
      { metadata_url: "http://10.0.0.1/metadata" },
    ];
    for (const body of refused) {
      const res = await management(server, "POST", "/config/auth/sso/providers", { type: "saml", ...body });
      expect(res.status).toBe(400);
    }
    expect((await management(server, "GET", "/config/auth/sso/providers")).body).toEqual(before.body);
  });

  it("fetches a metadata_url provider's metadata again when due: the identity provider's new key then signs in", async () => {
    const entity = "https://rotating-idp.example.test/metadata";
    let current = await makeIdentityProvider(entity);
    let fetches = 0;
    const host = http.createServer((_req, res) => {
      fetches++;
      res.writeHead(200, { "content-type": "application/xml" });
      res.end(current.idp.getMetadata());
    });
    await new Promise<void>((resolve) => host.listen(0, "127.0.0.1", resolve));
    const acs = `${server.url}/auth/v1/sso/saml/acs`;
    const rota: Account = {
      subject: "rota-1",
      mail: "rota@rotating.example",
      displayName: "Rota",
      groups: [],
    };
    const storedXml = async (id: string) =>
      (
        await server.controlSql(
          `select item->'saml'->>'metadata_xml' as xml from platform.project_settings,
                  jsonb_array_elements(value->'items') item
            where project_ref = $1 and kind = 'sso_providers' and item->>'id' = $2`,
          [server.ref, id],
        )
      ).rows[0].xml as string;
    try {
      const url = `http://127.0.0.1:${(host.address() as AddressInfo).port}/metadata`;
      const created = await management(server, "POST", "/config/auth/sso/providers", {
        type: "saml",
        metadata_url: url,
        domains: ["rotating.example"],
      });
      expect(created.status).toBe(201);
      const id = created.body.id as string;
      expect(fetches).toBe(1);
      // The identity provider rotates its signing key; the stored copy is fresh, so it is not fetched yet.
      const previous = current;
      current = await makeIdentityProvider(entity);
      const early = await post(await current.answer(sp, acs, rota));
      expect(new URL(early.location).searchParams.get("error_code")).toBe("validation_failed");
      expect(fetches).toBe(1);
      // A day later (the copy's time set back), the next use fetches it again and the new key signs in.
      await server.controlSql(
        `update platform.project_settings
            set value = jsonb_set(value, '{items}', (
              select jsonb_agg(case when item->>'id' = $2 then jsonb_set(item, '{updated_at}', to_jsonb($3::text))
                                    else item end order by n)
                from jsonb_array_elements(value->'items') with ordinality as t(item, n)))
          where project_ref = $1 and kind = 'sso_providers'`,
        [server.ref, id, new Date(Date.now() - 2 * 86400_000).toISOString()],
      );
      const later = await post(await current.answer(sp, acs, rota));
      expect(later.status).toBe(302);
      expect(paramsOf(later.location).access_token).toBeTruthy();
      expect(fetches).toBe(2);
      expect(await storedXml(id)).toBe(current.idp.getMetadata());
      // The old key signs no one in any more; the fresh copy is not fetched again at once.
      const stale = await post(await previous.answer(sp, acs, rota));
      expect(new URL(stale.location).searchParams.get("error_code")).toBe("validation_failed");
      expect(fetches).toBe(2);
    } finally {
      await new Promise<void>((resolve) => host.close(() => resolve()));
    }
  });

  it("clears relay states of sign-ins never finished after an hour", async () => {
    const started = await client("pkce").auth.signInWithSSO({ domain: "example.com" });
    const relay = new URL(started.data!.url).searchParams.get("RelayState")!;
    await server.sql(
      "update auth.saml_relay_states set created_at = now() - interval '2 hours' where id = $1",
      [relay],
    );
    const { rows } = await server.sql("select flow_state_id from auth.saml_relay_states where id = $1", [
      relay,
    ]);
    await client("pkce").auth.signInWithSSO({ domain: "example.com" });
    expect((await server.sql("select 1 from auth.saml_relay_states where id = $1", [relay])).rowCount).toBe(
      0,
    );
    expect(
      (await server.sql("select 1 from auth.flow_state where id = $1", [rows[0].flow_state_id])).rowCount,
    ).toBe(0);
  });

  it("names its URLs from saml_external_url when set (a proxy in front of /auth/v1)", async () => {
    const external = "https://auth.example.test/auth/v1";
    expect(
      (await management(server, "PATCH", "/config/auth", { saml_external_url: "not a url" })).status,
    ).toBe(400);
    expect(
      (await management(server, "PATCH", "/config/auth", { saml_external_url: `${external}/` })).status,
    ).toBe(200);
    const xml = await (await fetch(`${server.url}/auth/v1/sso/saml/metadata`)).text();
    expect(xml).toContain(`entityID="${external}/sso/saml/metadata"`);
    expect(xml).toContain(`Location="${external}/sso/saml/acs"`);
    // An answer addressed to the external names, delivered (through the proxy) to this ACS, signs in.
    const externalSp = samlify.ServiceProvider({ metadata: xml });
    const answer = await provider.answer(externalSp, `${external}/sso/saml/acs`, ada);
    const landed = await post({ ...answer, acs: `${server.url}/auth/v1/sso/saml/acs` });
    expect(landed.status).toBe(302);
    expect(paramsOf(landed.location).access_token).toBeTruthy();
    // An answer addressed to the direct URL is now for another audience.
    const direct = await post(await provider.answer(sp, `${server.url}/auth/v1/sso/saml/acs`, ada));
    expect(new URL(direct.location).searchParams.get("error_code")).toBe("validation_failed");
    await management(server, "PATCH", "/config/auth", { saml_external_url: "" });
  });

  it("answers unknown domains and providers and bad requests in the auth error format", async () => {
    const anon = client("implicit").auth;
    expect((await anon.signInWithSSO({ domain: "unknown.example" })).error).toMatchObject({
      status: 404,
      code: "sso_provider_not_found",
    });
    expect((await anon.signInWithSSO({ providerId: randomUUID() })).error).toMatchObject({
      status: 404,
      code: "sso_provider_not_found",
    });
    const both = await fetch(`${server.url}/auth/v1/sso`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ domain: "example.com", provider_id: providerId }),
    });
    expect(both.status).toBe(400);
    expect(await both.json()).toMatchObject({ error_code: "validation_failed" });
    const missing = await post({
      acs: `${server.url}/auth/v1/sso/saml/acs`,
      SAMLResponse: "",
      RelayState: "",
    });
    expect(missing.status).toBe(303);
    expect(new URL(missing.location).searchParams.get("error_description")).toBe("SAMLResponse is missing");
  });
});
