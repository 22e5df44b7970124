import { randomUUID } from "node:crypto";
import * as xmllint from "@authenio/samlify-xmllint-wasm";
import express, { Router } from "express";
import type pg from "pg";
import * as samlify from "samlify";
import { z } from "zod";
import { withAdminTransaction } from "../db/transaction";
import type { SsoProvider } from "../management/sso/routes";
import { kekOf } from "../platform/kek";
import type { ProjectRuntime } from "../projects/runtime";
import type { AuthSettings } from "./authConfig";
import { AUTH_BODY_LIMIT, AuthApiError } from "./errors";
import { afterUserCreated, beforeUserCreated } from "./hook";
import { redirectTarget, withParams } from "./redirects";
import { parse, pkceOf, type AuthToolkit, type Handle } from "./router";
import { setUser, startSession, userById, type UserRow } from "./users";

/**
 * SAML 2.0 single sign-on (auth-js signInWithSSO) through the providers registered with the Management API,
 * as the platform's auth server serves it: `POST /sso` answers the identity provider's URL with a signed
 * AuthnRequest (HTTP-Redirect binding), `POST /sso/saml/acs` takes its signed answer (HTTP-POST binding)
 * and signs the user in, `GET /sso/saml/metadata` is this service provider's metadata. SAML messages are
 * built, signed and verified by samlify, and checked against the SAML schemas (xmllint compiled to wasm).
 */
samlify.setSchemaValidator(xmllint);

const { binding } = samlify.Constants.namespace;
const NAME_ID = {
  email: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
  persistent: "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent",
  transient: "urn:oasis:names:tc:SAML:2.0:nameid-format:transient",
};
const SUBJECT_ID_ATTRIBUTE = "urn:oasis:names:tc:SAML:attribute:subject-id";
const EMAIL_ATTRIBUTES = [
  "urn:oid:0.9.2342.19200300.100.1.3",
  "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
  "http://schemas.xmlsoap.org/claims/EmailAddress",
  "mail",
  "Mail",
  "email",
];
/** Claims the platform keeps at the top of identity_data; other mapped attributes go to custom_claims. */
const STANDARD_CLAIMS = new Set([
  "aud",
  "iat",
  "exp",
  "name",
  "family_name",
  "given_name",
  "middle_name",
  "nickname",
  "preferred_username",
  "profile",
  "picture",
  "website",
  "gender",
  "birthdate",
  "zoneinfo",
  "locale",
  "updated_at",
  "phone",
  "phone_verified",
  "avatar_url",
  "full_name",
  "slug",
  "provider_id",
  "user_name",
]);
/** An AuthnRequest must come back within 2 minutes (the platform's relay state validity). */
const RELAY_STATE_SECONDS = 120;
const KEY_PURPOSE = "platform.saml_sp_keys.private_key";
const CERT_PURPOSE = "platform.saml_sp_keys.certificate";

interface SpKeys {
  privateKey: string;
  certificate: string;
}

/**
 * The project's service-provider key pair (sealed at rest), made on first use: an RSA 2048 key and a
 * self-signed certificate valid for 10 years, as the platform's SAML key.
 */
async function spKeys(pool: pg.Pool, ref: string): Promise<SpKeys> {
  const kek = kekOf(pool);
  const read = async () =>
    (
      await pool.query("select private_key, certificate from platform.saml_sp_keys where project_ref = $1", [
        ref,
      ])
    ).rows[0] as { private_key: string; certificate: string } | undefined;
  let row = await read();
  if (!row) {
    const now = new Date();
    // Loaded on use: a project without SSO never holds the certificate library.
    const { generate } = await import("selfsigned");
    const pems = await generate([{ name: "commonName", value: `SAML service provider ${ref}` }], {
      keySize: 2048,
      algorithm: "sha256",
      notBeforeDate: now,
      notAfterDate: new Date(now.getTime() + 10 * 365 * 24 * 3600 * 1000),
    });
    // Two first uses at once: the first insert wins, both read it.
    await pool.query(
      `insert into platform.saml_sp_keys (project_ref, private_key, certificate) values ($1, $2, $3)
       on conflict (project_ref) do nothing`,
      [ref, kek.seal(pems.private, KEY_PURPOSE), kek.seal(pems.cert, CERT_PURPOSE)],
    );
    row = (await read())!;
  }
  return {
    privateKey: kek.open(row.private_key, KEY_PURPOSE),
    certificate: kek.open(row.certificate, CERT_PURPOSE),
  };
}

/** This service provider as the platform describes it: entity id = metadata URL, ACS under /sso/saml/acs. */
function serviceProvider(
  apiUrl: string,
  keys: SpKeys,
  options: { relayState?: string; nameIdFormat?: string; encryption?: boolean },
) {
  return samlify.ServiceProvider({
    // With saml_allow_encrypted_assertions the key also decrypts, and the metadata offers it for encryption.
    ...(options.encryption ? { encPrivateKey: keys.privateKey, encryptCert: keys.certificate } : {}),
    entityID: `${apiUrl}/sso/saml/metadata`,
    authnRequestsSigned: true,
    wantAssertionsSigned: true,
    privateKey: keys.privateKey,
    signingCert: keys.certificate,
    requestSignatureAlgorithm: samlify.Constants.algorithms.signature.RSA_SHA256,
    nameIDFormat: options.nameIdFormat ? [options.nameIdFormat] : [NAME_ID.persistent, NAME_ID.email],
    assertionConsumerService: [{ Binding: binding.post, Location: `${apiUrl}/sso/saml/acs` }],
    relayState: options.relayState,
    // The platform allows a few seconds of clock difference between the two sides.
    clockDrifts: [-60_000, 60_000],
  });
}

/**
 * An identity provider from its metadata, or undefined when the document is none. samlify warns on the
 * console about optional parts (a missing logout service) each time: those warnings are left out.
 */
export function parseIdentityProvider(metadata: string, options: { encrypted?: boolean } = {}) {
  const warn = console.warn;
  console.warn = () => {};
  try {
    return samlify.IdentityProvider({ metadata, isAssertionEncrypted: Boolean(options.encrypted) });
  } catch {
    return undefined;
  } finally {
    console.warn = warn;
  }
}

function identityProvider(provider: SsoProvider, options: { encrypted?: boolean } = {}) {
  const idp = provider.saml.metadata_xml
    ? parseIdentityProvider(provider.saml.metadata_xml, options)
    : undefined;
  if (!idp)
    throw new AuthApiError(500, "unexpected_failure", "Error parsing SAML Metadata for SAML provider");
  return idp;
}

async function ssoProviders(project: ProjectRuntime): Promise<SsoProvider[]> {
  const { rows } = await project.platformPool.query(
    "select value from platform.project_settings where project_ref = $1 and kind = 'sso_providers'",
    [project.ref],
  );
  return (rows[0]?.value?.items as SsoProvider[] | undefined) ?? [];
}

/**
 * The base of this service provider's URLs (entity id, ACS): saml_external_url when set, as the platform's
 * SAML_EXTERNAL_URL (a proxy or custom domain in front of /auth/v1), else the auth API's own URL.
 */
function samlBase(tk: AuthToolkit, req: express.Request, settings: AuthSettings): string {
  const external = typeof settings.saml_external_url === "string" ? settings.saml_external_url.trim() : "";
  return external ? external.replace(/\/+$/, "") : tk.apiUrl(req);
}

async function samlSettings(tk: AuthToolkit, project: ProjectRuntime): Promise<AuthSettings> {
  const settings = await tk.settings(project);
  if (settings.saml_enabled !== true) {
    throw new AuthApiError(404, "saml_provider_disabled", "SAML 2.0 is disabled");
  }
  return settings;
}

const ssoBody = z.object({
  provider_id: z.string().uuid().nullish(),
  domain: z.string().nullish(),
  redirect_to: z.string().nullish(),
  skip_http_redirect: z.boolean().nullish(),
  code_challenge: z.string().nullish(),
  code_challenge_method: z.string().nullish(),
  gotrue_meta_security: z.unknown().optional(),
});

type Attributes = Record<string, string | string[]>;
type Mapping = {
  keys?: Record<string, { name?: string; names?: string[]; default?: unknown; array?: boolean }>;
};

/** The values of an attribute named `name` (its Name or FriendlyName, in any case). */
function attribute(attributes: Attributes, name: string): string[] {
  const values: string[] = [];
  for (const [key, value] of Object.entries(attributes)) {
    if (key.toLowerCase() === name.toLowerCase()) values.push(...(Array.isArray(value) ? value : [value]));
  }
  return values.filter((v) => typeof v === "string" && v !== "");
}

/** The provider's attribute mapping applied to an assertion, as the platform's SAMLAssertion.Process. */
function mapAttributes(attributes: Attributes, mapping: Mapping | undefined): Record<string, unknown> {
  const claims: Record<string, unknown> = {};
  for (const [key, mapper] of Object.entries(mapping?.keys ?? {})) {
    const names = [...(mapper.name ? [mapper.name] : []), ...(mapper.names ?? [])];
    let set = false;
    for (const name of names) {
      const values = attribute(attributes, name);
      if (!values.length) continue;
      claims[key] = mapper.array ? values : values[0];
      set = true;
      break;
    }
    if (!set && mapper.default !== undefined && mapper.default !== null) claims[key] = mapper.default;
  }
  return claims;
}

/** oauth error names of the platform's error redirects, by status. */
const OAUTH_ERRORS: Record<number, string> = {
  400: "invalid_request",
  401: "unauthorized_client",
  403: "access_denied",
  500: "server_error",
  503: "temporarily_unavailable",
};

interface Extract {
  nameID?: string;
  conditions?: { notOnOrAfter?: string };
  issuer?: string;
  audience?: string | string[];
  attributes?: Attributes;
  response?: { id?: string; inResponseTo?: string; destination?: string };
  sessionIndex?: { sessionNotOnOrAfter?: string };
  nameIDFormat?: string;
}

export function samlRoutes(tk: AuthToolkit, handle: Handle): Router {
  const router = Router({ caseSensitive: true });

  router.post(
    "/sso",
    handle(async (project, req, res) => {
      const settings = await samlSettings(tk, project);
      const body = parse(ssoBody, req.body);
      if (body.provider_id && body.domain) {
        throw new AuthApiError(400, "validation_failed", "Only one of provider_id or domain supported");
      }
      if (!body.provider_id && !body.domain) {
        throw new AuthApiError(400, "validation_failed", "A provider_id or domain needs to be provided");
      }
      const items = await ssoProviders(project);
      const domain = body.domain?.trim().toLowerCase();
      const provider = body.provider_id
        ? items.find((p) => p.id === body.provider_id)
        : items.find((p) => p.domains.some((d) => d.domain.toLowerCase() === domain));
      if (!provider) {
        throw new AuthApiError(
          404,
          "sso_provider_not_found",
          body.provider_id ? "No such SSO provider" : "No SSO provider assigned for this domain",
        );
      }
      const pkce = pkceOf(body);
      const idp = identityProvider(provider);
      const relayStateId = randomUUID();
      const sp = serviceProvider(
        samlBase(tk, req, settings),
        await spKeys(project.platformPool, project.ref),
        {
          relayState: relayStateId,
          nameIdFormat: provider.saml.name_id_format,
        },
      );
      let request: { id: string; context: string };
      try {
        request = sp.createLoginRequest(idp, "redirect");
      } catch {
        throw new AuthApiError(
          500,
          "unexpected_failure",
          "Error creating SAML Authentication Request: the identity provider has no HTTP-Redirect sign-on service",
        );
      }
      await withAdminTransaction(project.authPool, async (db) => {
        // Sign-ins never finished leave their relay state (and unused PKCE state): cleared after an hour.
        await db.query(
          `with gone as (delete from auth.saml_relay_states where created_at < now() - interval '1 hour'
                         returning flow_state_id)
           delete from auth.flow_state
            where id in (select flow_state_id from gone) and user_id is null`,
        );
        let flowStateId: string | null = null;
        if (pkce) {
          const { rows } = await db.query(
            `insert into auth.flow_state (auth_code, code_challenge_method, code_challenge, provider_type,
                                          authentication_method)
             values ($1, $2, $3, 'sso/saml', 'sso/saml') returning id`,
            [randomUUID(), pkce.method, pkce.codeChallenge],
          );
          flowStateId = rows[0].id;
        }
        await db.query(
          `insert into auth.saml_relay_states (id, sso_provider_id, request_id, redirect_to, flow_state_id)
           values ($1, $2, $3, $4, $5)`,
          [relayStateId, provider.id, request.id, body.redirect_to ?? null, flowStateId],
        );
      });
      if (body.skip_http_redirect) return { url: request.context };
      res.redirect(303, request.context);
    }),
  );

  router.get(
    "/sso/saml/metadata",
    handle(
      async (project, req, res) => {
        const settings = await samlSettings(tk, project);
        const sp = serviceProvider(
          samlBase(tk, req, settings),
          await spKeys(project.platformPool, project.ref),
          {
            encryption: settings.saml_allow_encrypted_assertions === true,
          },
        );
        res.set("Content-Type", "application/xml");
        res.set("Cache-Control", "public, max-age=600");
        if (req.query.download === "true") {
          res.set("Content-Disposition", 'attachment; filename="metadata.xml"');
        }
        res.status(200).send(sp.getMetadata());
      },
      { keyRequired: false },
    ),
  );

  router.post(
    "/sso/saml/acs",
    express.urlencoded({ extended: false, limit: AUTH_BODY_LIMIT }),
    handle(
      async (project, req, res) => {
        const settings = await tk.settings(project);
        try {
          const target = await consumeAssertion(tk, project, req, settings);
          res.redirect(302, target);
        } catch (e) {
          if (!(e instanceof AuthApiError)) throw e;
          // As the platform: errors go back to the site URL's query.
          const query = {
            error: OAUTH_ERRORS[e.status] ?? "server_error",
            error_code: e.errorCode,
            error_description: e.message,
          };
          res.redirect(303, withParams(String(settings.site_url), query, "query"));
        }
      },
      { keyRequired: false },
    ),
  );

  return router;
}

/** Verifies the identity provider's answer, signs its user in and answers where the browser goes next. */
async function consumeAssertion(
  tk: AuthToolkit,
  project: ProjectRuntime,
  req: express.Request,
  settings: AuthSettings,
): Promise<string> {
  if (settings.saml_enabled !== true) {
    throw new AuthApiError(404, "saml_provider_disabled", "SAML 2.0 is disabled");
  }
  const body = (req.body ?? {}) as Record<string, unknown>;
  const relayValue = typeof body.RelayState === "string" ? body.RelayState : "";
  const samlResponse = typeof body.SAMLResponse === "string" ? body.SAMLResponse : "";
  if (!samlResponse) throw new AuthApiError(400, "validation_failed", "SAMLResponse is missing");
  const items = await ssoProviders(project);
  let provider: SsoProvider | undefined;
  let requestId: string | undefined;
  let flowStateId: string | null = null;
  let redirectTo: string;
  if (z.string().uuid().safeParse(relayValue).success) {
    // Started here (POST /sso): the relay state names the provider and the request; it is used once.
    const { rows } = await project.authPool.query(
      `delete from auth.saml_relay_states where id = $1
       returning sso_provider_id, request_id, redirect_to, flow_state_id,
                 extract(epoch from now() - created_at) as age`,
      [relayValue],
    );
    const relay = rows[0];
    if (!relay) {
      throw new AuthApiError(
        404,
        "saml_relay_state_not_found",
        "SAML RelayState does not exist, try logging in again?",
      );
    }
    if (Number(relay.age) >= RELAY_STATE_SECONDS) {
      throw new AuthApiError(
        422,
        "saml_relay_state_expired",
        "SAML RelayState has expired. Try logging in again?",
      );
    }
    provider = items.find((p) => p.id === relay.sso_provider_id);
    if (!provider)
      throw new AuthApiError(500, "unexpected_failure", "Unable to find SSO Provider from SAML RelayState");
    requestId = relay.request_id;
    flowStateId = relay.flow_state_id;
    redirectTo = relay.redirect_to ?? "";
  } else if (relayValue === "" || URL.canParse(relayValue)) {
    // Started at the identity provider: its issuer names the provider; the relay state, if any, is where to go.
    const xml = Buffer.from(samlResponse, "base64").toString("utf8");
    const issuer = /<(?:\w+:)?Issuer\b[^>]*>\s*([^<\s]+)\s*<\/(?:\w+:)?Issuer>/.exec(xml)?.[1];
    if (!issuer)
      throw new AuthApiError(400, "validation_failed", "SAMLResponse is not a valid XML SAML assertion");
    provider = items.find((p) => p.saml.entity_id === issuer);
    redirectTo = relayValue;
  } else {
    throw new AuthApiError(400, "validation_failed", "SAML RelayState is not a valid UUID or URL");
  }
  if (!provider) {
    throw new AuthApiError(
      404,
      "saml_idp_not_found",
      "A SAML connection has not been established with this Identity Provider",
    );
  }
  const apiUrl = samlBase(tk, req, settings);
  const encrypted = /<(?:\w+:)?EncryptedAssertion\b/.test(
    Buffer.from(samlResponse, "base64").toString("utf8"),
  );
  if (encrypted && settings.saml_allow_encrypted_assertions !== true) {
    throw new AuthApiError(
      400,
      "validation_failed",
      "SAML Assertion is not valid: encrypted assertions are not allowed",
    );
  }
  const sp = serviceProvider(apiUrl, await spKeys(project.platformPool, project.ref), {
    encryption: encrypted,
  });
  let extract: Extract;
  let content: string;
  try {
    // Signature (assertion or response) against the provider's certificate, schema, issuer, time window;
    // an encrypted assertion is decrypted with the SP key first.
    const parsed = await sp.parseLoginResponse(identityProvider(provider, { encrypted }), "post", {
      body: { SAMLResponse: samlResponse },
    });
    extract = parsed.extract as Extract;
    content = String(parsed.samlContent);
  } catch {
    throw new AuthApiError(400, "validation_failed", "SAML Assertion is not valid");
  }
  const audiences = [extract.audience ?? []].flat();
  if (audiences.length && !audiences.includes(sp.entityMeta.getEntityID())) {
    throw new AuthApiError(
      400,
      "validation_failed",
      "SAML Assertion is not valid: it is meant for another audience",
    );
  }
  if (extract.response?.destination && extract.response.destination !== `${apiUrl}/sso/saml/acs`) {
    throw new AuthApiError(400, "validation_failed", "SAML Assertion is not valid: wrong destination");
  }
  // An answer to a request of ours must name that request; an unsolicited one must name none.
  if ((extract.response?.inResponseTo || undefined) !== requestId) {
    throw new AuthApiError(
      400,
      "validation_failed",
      "SAML Assertion is not valid: InResponseTo does not match",
    );
  }
  await consumeOnce(project, extract, content);
  const attributes = extract.attributes ?? {};
  const nameIdFormat = /<(?:\w+:)?NameID\b[^>]*\bFormat="([^"]+)"/.exec(content)?.[1] ?? "";
  let subject = attribute(attributes, SUBJECT_ID_ATTRIBUTE)[0] ?? "";
  if (!subject && extract.nameID && nameIdFormat !== NAME_ID.transient) {
    subject = nameIdFormat === NAME_ID.email ? extract.nameID.trim().toLowerCase() : extract.nameID;
  }
  if (!subject) {
    throw new AuthApiError(
      400,
      "saml_assertion_no_user_id",
      "SAML Assertion did not contain a persistent Subject Identifier attribute or Subject NameID uniquely identifying this user",
    );
  }
  const claims = mapAttributes(attributes, provider.saml.attribute_mapping as Mapping | undefined);
  let email = typeof claims.email === "string" ? claims.email : "";
  if (!email) {
    email =
      EMAIL_ATTRIBUTES.map((n) => attribute(attributes, n)[0]).find(Boolean) ??
      (nameIdFormat === NAME_ID.email ? (extract.nameID ?? "") : "");
  }
  if (!email)
    throw new AuthApiError(
      400,
      "saml_assertion_no_email",
      "SAML Assertion does not contain an email address",
    );
  email = email.toLowerCase();
  const custom: Record<string, unknown> = {};
  const identityData: Record<string, unknown> = {
    iss: provider.saml.entity_id,
    sub: subject,
    email,
    email_verified: true,
  };
  for (const [key, value] of Object.entries(claims)) {
    if (["iss", "sub", "email", "email_verified"].includes(key)) continue;
    if (STANDARD_CLAIMS.has(key)) identityData[key] = value;
    else custom[key] = value;
  }
  if (Object.keys(custom).length) identityData.custom_claims = custom;
  const notAfter = extract.sessionIndex?.sessionNotOnOrAfter
    ? new Date(extract.sessionIndex.sessionNotOnOrAfter)
    : null;
  const providerType = `sso:${provider.id}`;
  const providerId = provider.id;

  let created: UserRow | undefined;
  const outcome = await withAdminTransaction(project.authPool, async (db) => {
    // SSO identities link only within their provider: one user per subject, never by address.
    const { rows } = await db.query(
      "select user_id from auth.identities where provider = $1 and provider_id = $2 for update",
      [providerType, subject],
    );
    let user: UserRow | undefined = rows[0] ? await userById(db, rows[0].user_id) : undefined;
    if (!user) {
      if (settings.disable_signup) {
        throw new AuthApiError(422, "signup_disabled", "Signups not allowed for this instance");
      }
      user = (
        await db.query(
          `insert into auth.users (email, email_confirmed_at, is_sso_user, raw_app_meta_data, raw_user_meta_data)
           values ($1, now(), true, $2, $3) returning *`,
          [
            email,
            JSON.stringify({ provider: providerType, providers: [providerType] }),
            JSON.stringify(identityData),
          ],
        )
      ).rows[0] as UserRow;
      await beforeUserCreated(project.authPool, settings, user, req.ip);
      created = user;
    } else {
      if (user.banned_until && user.banned_until.getTime() > Date.now()) {
        throw new AuthApiError(403, "user_banned", "User is banned");
      }
      // The provider is the source of truth for its users: its claims and address replace the old ones.
      await db.query(
        `update auth.users set raw_user_meta_data = raw_user_meta_data || $2::jsonb, email = $3,
                email_confirmed_at = coalesce(email_confirmed_at, now()), updated_at = now()
          where id = $1`,
        [user.id, JSON.stringify(identityData), email],
      );
      if (!user.email_confirmed_at) await setUser(db, user.id, { email_confirmed_at: new Date() });
    }
    await db.query(
      `insert into auth.identities (provider_id, user_id, identity_data, provider, last_sign_in_at)
       values ($1, $2, $3, $4, now())
       on conflict (provider_id, provider) do update
         set identity_data = excluded.identity_data, last_sign_in_at = now(), updated_at = now()`,
      [subject, user.id, JSON.stringify(identityData), providerType],
    );
    if (flowStateId) {
      const flow = await db.query(
        `update auth.flow_state set user_id = $2, auth_code_issued_at = now(), updated_at = now()
          where id = $1 and user_id is null returning auth_code`,
        [flowStateId, user.id],
      );
      if (!flow.rows[0])
        throw new AuthApiError(400, "flow_state_already_used", "State has already been used");
      return { kind: "code" as const, code: flow.rows[0].auth_code as string };
    }
    const session = await startSession(db, user.id, "sso/saml");
    await db.query("update auth.sessions set not_after = $2, sso_provider_id = $3 where id = $1", [
      session.sessionId,
      notAfter,
      providerId,
    ]);
    return { kind: "session" as const, user: (await userById(db, user.id))!, session };
  });
  if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
  const target = redirectTarget(settings, redirectTo);
  if (outcome.kind === "code") return withParams(target, { code: outcome.code }, "query");
  const s = await tk.sessionResponse(project, req, outcome.user, outcome.session, settings, "sso/saml");
  return withParams(
    target,
    {
      access_token: String(s.access_token),
      expires_at: String(s.expires_at),
      expires_in: String(s.expires_in),
      refresh_token: String(s.refresh_token),
      token_type: "bearer",
    },
    "fragment",
  );
}

/** How long an ID is kept when the assertion states no NotOnOrAfter at all. */
const UNBOUNDED_KEEP_MS = 24 * 3600 * 1000;
/** The clock difference samlify allows on NotOnOrAfter (serviceProvider clockDrifts). */
const CLOCK_DRIFT_MS = 60_000;

/**
 * Replay protection: a verified response and its assertion are taken once. Their IDs are recorded in the
 * control plane (shared by every node) until the assertion stops being valid, and a second use is refused.
 * An answer to a request of ours is already bound to a one-time relay state; an unsolicited (IdP-initiated)
 * one is not, so this is what stops it from signing in again within its validity window.
 */
async function consumeOnce(project: ProjectRuntime, extract: Extract, content: string): Promise<void> {
  // samlify refuses a response with more than one assertion, so the one assertion here is the verified one.
  const fields = samlify.Extractor.extract(content, [
    // (Two attributes each: with one, samlify answers the bare value instead of an object.)
    { key: "assertion", localPath: ["Response", "Assertion"], attributes: ["ID", "IssueInstant"] },
    {
      key: "confirmation",
      localPath: ["Response", "Assertion", "Subject", "SubjectConfirmation", "SubjectConfirmationData"],
      attributes: ["NotOnOrAfter", "Recipient"],
    },
  ]) as { assertion?: { id?: string }; confirmation?: { notOnOrAfter?: string } };
  const ids = [
    ["response", extract.response?.id],
    ["assertion", fields.assertion?.id],
  ].filter((pair): pair is [string, string] => typeof pair[1] === "string" && pair[1] !== "");
  if (!ids.length) {
    throw new AuthApiError(400, "validation_failed", "SAML Assertion is not valid: it carries no ID");
  }
  const ends = [extract.conditions?.notOnOrAfter, fields.confirmation?.notOnOrAfter]
    .map((v) => (v ? Date.parse(v) : NaN))
    .filter((v) => Number.isFinite(v));
  const expiresAt = new Date(
    (ends.length ? Math.max(...ends) : Date.now() + UNBOUNDED_KEEP_MS) + CLOCK_DRIFT_MS,
  );
  await project.platformPool.query("delete from platform.saml_consumed_ids where expires_at < now()");
  const { rows } = await project.platformPool.query(
    `insert into platform.saml_consumed_ids (project_ref, kind, id, expires_at)
     select $1, kind, id, $3 from unnest($2::text[], $4::text[]) as t(kind, id)
     on conflict do nothing returning id`,
    [project.ref, ids.map((p) => p[0]), expiresAt, ids.map((p) => p[1])],
  );
  if (rows.length < ids.length) {
    throw new AuthApiError(400, "validation_failed", "SAML Assertion is not valid: it has already been used");
  }
}
