import * as xmllint from "@authenio/samlify-xmllint-wasm";
import type pg from "pg";
import * as samlify from "samlify";
import { fetchPublicText } from "../net/outbound";
import { kekOf } from "../platform/kek";
import type { ProjectRuntime } from "../projects/runtime";
import type { AuthSettings } from "./authConfig";
import type { AuthCall } from "./call";
import { AuthApiError } from "./errors";
import { STANDARD_CLAIMS } from "./idTokens";
import {
  insertSpKeys,
  recordConsumedIds,
  replaceProviderMetadata,
  spKeyRow,
  type SsoProvider,
} from "./store/saml";

/**
 * SAML 2.0 as Strata's service provider speaks it, with samlify: SAML messages are built, signed and verified
 * by samlify and checked against the SAML schemas (xmllint compiled to wasm). Here: the project's key pair,
 * this service provider and an identity provider from its metadata, and what a verified response says of
 * its user. The endpoints are handlers/sso.ts and handlers/samlAcs.ts; the providers are registered with
 * the Management API (management/sso), which parses their metadata here.
 */
samlify.setSchemaValidator(xmllint);

const { binding } = samlify.Constants.namespace;
export const NAME_ID = {
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
/** Claims the assertion itself sets: a mapped attribute of that name is passed over. */
const ASSERTED_CLAIMS = ["iss", "sub", "email", "email_verified"];
/** Claims the platform keeps at the top of identity_data; other mapped attributes go to custom_claims. */
const TOP_LEVEL_CLAIMS = new Set(
  [...STANDARD_CLAIMS].filter((c) => c !== "custom_claims" && !ASSERTED_CLAIMS.includes(c)),
);
const KEY_PURPOSE = "platform.saml_sp_keys.private_key";
const CERT_PURPOSE = "platform.saml_sp_keys.certificate";
/** How long an ID is kept when the assertion states no NotOnOrAfter at all. */
const UNBOUNDED_KEEP_MS = 24 * 3600 * 1000;
/** The clock difference samlify allows on NotOnOrAfter (serviceProvider clockDrifts). */
const CLOCK_DRIFT_MS = 60_000;

interface SpKeys {
  privateKey: string;
  certificate: string;
}

/**
 * The project's service-provider key pair (sealed at rest), made on first use: an RSA 2048 key and a
 * self-signed certificate valid for 10 years, as the platform's SAML key.
 */
async function spKeys(platformPool: pg.Pool, ref: string): Promise<SpKeys> {
  const kek = kekOf(platformPool);
  let row = await spKeyRow(platformPool, ref);
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
    await insertSpKeys(platformPool, ref, {
      privateKey: kek.seal(pems.private, KEY_PURPOSE),
      certificate: kek.seal(pems.cert, CERT_PURPOSE),
    });
    row = (await spKeyRow(platformPool, ref))!;
  }
  return {
    privateKey: kek.open(row.private_key, KEY_PURPOSE),
    certificate: kek.open(row.certificate, CERT_PURPOSE),
  };
}

/** What the project's service provider is built from: the project, its auth settings and its API's URL. */
type SamlCall = Pick<AuthCall, "project" | "settings" | "apiUrl">;

/**
 * The project's service provider as the platform describes it: entity id = metadata URL, ACS under
 * /sso/saml/acs, all at the project's SAML base URL (samlBase), signing with its key pair (spKeys).
 */
export async function serviceProvider(
  call: SamlCall,
  options: { relayState?: string; nameIdFormat?: string; encryption?: boolean } = {},
) {
  const apiUrl = samlBase(call.settings, call.apiUrl);
  const keys = await spKeys(call.project.platformPool, call.project.ref);
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
    // Single logout: either side's LogoutRequest and LogoutResponse, signed (an identity provider's are
    // verified against its metadata's certificate).
    singleLogoutService: [
      { Binding: binding.redirect, Location: `${apiUrl}/sso/saml/slo` },
      { Binding: binding.post, Location: `${apiUrl}/sso/saml/slo` },
    ],
    wantLogoutRequestSigned: true,
    wantLogoutResponseSigned: true,
    relayState: options.relayState,
    // The platform allows a few seconds of clock difference between the two sides.
    clockDrifts: [-60_000, 60_000],
  });
}

type ServiceProvider = Awaited<ReturnType<typeof serviceProvider>>;

/**
 * An identity provider from its metadata, or undefined when the document is none. samlify warns on the
 * console about optional parts (a missing logout service) each time: those warnings are left out.
 */
export function parseIdentityProvider(metadata: string, options: { encrypted?: boolean } = {}) {
  const warn = console.warn;
  console.warn = () => {};
  try {
    // The logout messages Strata sends it are signed.
    return samlify.IdentityProvider({
      metadata,
      isAssertionEncrypted: Boolean(options.encrypted),
      wantLogoutRequestSigned: true,
      wantLogoutResponseSigned: true,
    });
  } catch {
    return undefined;
  } finally {
    console.warn = warn;
  }
}

/** A registered provider's identity provider (500 when its stored metadata no longer parses). */
export function identityProvider(provider: SsoProvider, options: { encrypted?: boolean } = {}) {
  const idp = provider.saml.metadata_xml
    ? parseIdentityProvider(provider.saml.metadata_xml, options)
    : undefined;
  if (!idp)
    throw new AuthApiError(500, "unexpected_failure", "Error parsing SAML Metadata for SAML provider");
  return idp;
}

/** Metadata without validUntil or cacheDuration is fetched again after a day, as the platform does. */
const METADATA_DEFAULT_MAX_AGE_MS = 24 * 3600 * 1000;

/** An ISO 8601 duration (`PT1H`, `P1DT12H`, `PT30M`) in milliseconds; NaN when it is none. */
function durationMs(value: string): number {
  const m = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(value.trim());
  if (!m || value.trim() === "P" || value.trim().endsWith("T")) return NaN;
  const [d, h, min, s] = m.slice(1).map((v) => Number(v ?? 0));
  return (((d * 24 + h) * 60 + min) * 60 + s) * 1000;
}

/**
 * Whether a provider's metadata from its metadata_url is due to be fetched again, by the rules of the
 * platform's auth server: its validUntil has passed, its cacheDuration since it was fetched has passed, or
 * (with neither) a day has.
 */
export function metadataDue(provider: SsoProvider, now = Date.now()): boolean {
  const xml = provider.saml.metadata_xml ?? "";
  const root = /<(?:\w+:)?EntityDescriptor\b[^>]*>/.exec(xml)?.[0] ?? "";
  const validUntil = Date.parse(/\bvalidUntil="([^"]+)"/.exec(root)?.[1] ?? "");
  const cacheMs = durationMs(/\bcacheDuration="([^"]+)"/.exec(root)?.[1] ?? "");
  const fetchedAt = Date.parse(provider.updated_at);
  if (Number.isFinite(validUntil) && now > validUntil) return true;
  if (Number.isFinite(cacheMs)) return now > fetchedAt + cacheMs;
  return !Number.isFinite(validUntil) && now > fetchedAt + METADATA_DEFAULT_MAX_AGE_MS;
}

/**
 * A provider registered with a metadata_url, its metadata fetched again (under the outbound policy) when due
 * and kept; a copy that cannot be fetched, does not parse or names another entity is not taken, and the
 * stored one stays in use.
 */
export async function refreshedProvider(
  project: ProjectRuntime,
  provider: SsoProvider,
): Promise<SsoProvider> {
  if (!provider.saml.metadata_url || !metadataDue(provider)) return provider;
  let xml: string;
  try {
    xml = await fetchPublicText(provider.saml.metadata_url);
  } catch {
    return provider;
  }
  if (parseIdentityProvider(xml)?.entityMeta.getEntityID() !== provider.saml.entity_id) return provider;
  await replaceProviderMetadata(project.platformPool, project.ref, provider, xml);
  return { ...provider, saml: { ...provider.saml, metadata_xml: xml }, updated_at: new Date().toISOString() };
}

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

/** What samlify extracts from a verified response. */
export interface Extract {
  nameID?: string;
  conditions?: { notOnOrAfter?: string };
  issuer?: string;
  audience?: string | string[];
  attributes?: Attributes;
  response?: { id?: string; inResponseTo?: string; destination?: string };
  sessionIndex?: { sessionNotOnOrAfter?: string };
  nameIDFormat?: string;
}

/**
 * The identity provider's response (base64, HTTP-POST binding), verified: its signature (assertion or
 * response) against the provider's certificate, the schemas, the issuer and time window (an encrypted
 * assertion is decrypted with the SP key first); then that it is meant for this service provider at
 * `apiUrl`, and answers the request `requestId` (none for one the identity provider started).
 */
export async function verifyResponse(
  sp: ServiceProvider,
  provider: SsoProvider,
  samlResponse: string,
  expected: { apiUrl: string; requestId: string | undefined; encrypted: boolean },
): Promise<{ extract: Extract; content: string }> {
  let extract: Extract;
  let content: string;
  try {
    const parsed = await sp.parseLoginResponse(
      identityProvider(provider, { encrypted: expected.encrypted }),
      "post",
      { body: { SAMLResponse: samlResponse } },
    );
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
  if (extract.response?.destination && extract.response.destination !== `${expected.apiUrl}/sso/saml/acs`) {
    throw new AuthApiError(400, "validation_failed", "SAML Assertion is not valid: wrong destination");
  }
  // An answer to a request of ours must name that request; an unsolicited one must name none.
  if ((extract.response?.inResponseTo || undefined) !== expected.requestId) {
    throw new AuthApiError(
      400,
      "validation_failed",
      "SAML Assertion is not valid: InResponseTo does not match",
    );
  }
  return { extract, content };
}

/** The user a verified assertion names: its subject, address and claims, and when its session ends. */
export interface AssertedUser {
  subject: string;
  email: string;
  identityData: Record<string, unknown>;
  notAfter: Date | null;
}

/**
 * The user of a verified assertion, as the platform reads it: the subject-id attribute or a NameID that is
 * not transient, the address (mapped, a known attribute, or an email NameID), the mapped claims.
 */
export function assertedUser(provider: SsoProvider, extract: Extract, content: string): AssertedUser {
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
    if (ASSERTED_CLAIMS.includes(key)) continue;
    if (TOP_LEVEL_CLAIMS.has(key)) identityData[key] = value;
    else custom[key] = value;
  }
  if (Object.keys(custom).length) identityData.custom_claims = custom;
  const notAfter = extract.sessionIndex?.sessionNotOnOrAfter
    ? new Date(extract.sessionIndex.sessionNotOnOrAfter)
    : null;
  return { subject, email, identityData, notAfter };
}

/**
 * Replay protection: a verified response and its assertion are taken once. Their IDs are recorded in the
 * control plane (shared by every node) until the assertion stops being valid, and a second use is refused.
 * An answer to a request of ours is already bound to a one-time relay state; an unsolicited (IdP-initiated)
 * one is not, so this is what stops it from signing in again within its validity window.
 */
export async function consumeOnce(project: ProjectRuntime, extract: Extract, content: string): Promise<void> {
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
  if ((await recordConsumedIds(project.platformPool, project.ref, ids, expiresAt)) < ids.length) {
    throw new AuthApiError(400, "validation_failed", "SAML Assertion is not valid: it has already been used");
  }
}

/** SAML's endpoints answer 404 while the project's saml_enabled is off. */
export function requireSaml(settings: AuthSettings): void {
  if (settings.saml_enabled !== true) {
    throw new AuthApiError(404, "saml_provider_disabled", "SAML 2.0 is disabled");
  }
}

/**
 * The base of this service provider's URLs (entity id, ACS): saml_external_url when set, as the platform's
 * SAML_EXTERNAL_URL (a proxy or custom domain in front of /auth/v1), else the auth API's own URL.
 */
export function samlBase(settings: AuthSettings, apiUrl: string): string {
  const external = typeof settings.saml_external_url === "string" ? settings.saml_external_url.trim() : "";
  return external ? external.replace(/\/+$/, "") : apiUrl;
}
