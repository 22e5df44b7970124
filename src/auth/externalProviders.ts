import { fetchOutbound, fetchPublicJson } from "../net/outbound";
import type pg from "pg";
import type { AuthSettings } from "./authConfig";
import { customProvider } from "./customProviders";
import { AuthApiError } from "./errors";
import type { ProviderUser } from "./idTokens";
import { signedGet } from "./oauth1";
import type { ConfiguredProvider, Endpoints, ProviderSpec, ProviderTokens } from "./providerSpec";
import { PROVIDERS } from "./providerTable";

// A sign-in with an OAuth provider of providerTable.ts: the provider as configured, its authorize URL, the
// code exchange and the user it answers.

/** A comma-separated setting as its items. */
const list = (v: unknown) =>
  String(v ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * The provider `name` as the project configured it; refused (400) when Strata does not sign in with it, it
 * is off, or it lacks a client id (or keycloak its URL).
 */
export function configuredProvider(
  settings: AuthSettings,
  operatorBases: Record<string, string>,
  name: string,
): { spec: ProviderSpec; p: ConfiguredProvider } {
  const spec = Object.hasOwn(PROVIDERS, name) ? PROVIDERS[name] : undefined;
  if (!spec || settings[`external_${name}_enabled`] !== true) {
    throw new AuthApiError(400, "validation_failed", "Unsupported provider: provider is not enabled");
  }
  const clientIds = [
    ...list(settings[`external_${name}_client_id`]),
    ...list(settings[`external_${name}_additional_client_ids`]),
  ];
  const slotUrl = String(settings[`external_${name}_url`] ?? "").replace(/\/+$/, "");
  const base = (spec.urlSlot ? slotUrl : operatorBases[name]) || undefined;
  if (!clientIds.length || (spec.urlSlot === "required" && !base)) {
    throw new AuthApiError(400, "validation_failed", `Unsupported provider: ${name} is not configured`);
  }
  return {
    spec,
    p: {
      name,
      clientId: clientIds[0],
      clientIds,
      secret: String(settings[`external_${name}_secret`] ?? ""),
      base,
      emailOptional: settings[`external_${name}_email_optional`] === true,
      skipNonceCheck: settings[`external_${name}_skip_nonce_check`] === true,
    },
  };
}

/** The provider `name`: a custom one (`custom:<name>`) of the project's, or a built-in one as configured. */
export async function resolveProvider(
  db: pg.Pool,
  settings: AuthSettings,
  operatorBases: Record<string, string>,
  name: string,
): Promise<{ spec: ProviderSpec; p: ConfiguredProvider }> {
  return name.startsWith("custom:")
    ? customProvider(db, settings, name)
    : configuredProvider(settings, operatorBases, name);
}

/** The provider's authorize URL for a sign-in: its scopes with the caller's, and the caller's extra parameters. */
export async function authorizeUrl(
  spec: ProviderSpec,
  p: ConfiguredProvider,
  options: {
    redirectUri: string;
    state: string;
    scopes: string;
    extra: Record<string, string>;
    /** The provider's own PKCE challenge (requiresPkce). */
    codeChallenge?: string;
  },
): Promise<string> {
  const scopes = [...spec.scopes, ...(spec.fixedScopes ? [] : list(options.scopes.replace(/ /g, ",")))];
  let endpoints: Endpoints;
  try {
    endpoints = await spec.endpoints(p);
  } catch {
    // An OIDC provider whose discovery document cannot be read, as the platform refuses it.
    throw new AuthApiError(400, "validation_failed", `Unsupported provider: ${p.name} discovery failed`);
  }
  const url = new URL(endpoints.authorize);
  for (const [k, v] of Object.entries({ ...options.extra, ...spec.authorizeParams }))
    url.searchParams.set(k, v);
  url.searchParams.set("client_id", p.clientId);
  url.searchParams.set("redirect_uri", options.redirectUri);
  url.searchParams.set("response_type", "code");
  if (scopes.length) url.searchParams.set("scope", [...new Set(scopes)].join(" "));
  url.searchParams.set("state", options.state);
  if (options.codeChallenge) {
    url.searchParams.set("code_challenge", options.codeChallenge);
    url.searchParams.set("code_challenge_method", "S256");
  }
  return url.href;
}

/** A token endpoint's answer: JSON, or a form (GitHub without an Accept header). */
function parseTokens(text: string, contentType: string | null): ProviderTokens {
  const answer = /application\/x-www-form-urlencoded|text\/plain/.test(contentType ?? "")
    ? Object.fromEntries(new URLSearchParams(text))
    : JSON.parse(text);
  if (typeof answer?.access_token !== "string" || !answer.access_token) throw new Error("no access token");
  return answer;
}

/** The provider's code exchanged at its token endpoint (Basic client authentication unless in the body). */
export async function exchangeCode(
  spec: ProviderSpec,
  p: ConfiguredProvider,
  code: string,
  redirectUri: string,
  codeVerifier?: string,
): Promise<ProviderTokens> {
  const form = new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: redirectUri });
  if (codeVerifier) form.set("code_verifier", codeVerifier);
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json",
  };
  if (spec.credentialsInBody) {
    form.set("client_id", p.clientId);
    form.set("client_secret", p.secret);
  } else {
    const basic = `${encodeURIComponent(p.clientId)}:${encodeURIComponent(p.secret)}`;
    headers.authorization = `Basic ${Buffer.from(basic).toString("base64")}`;
  }
  const res = await fetchOutbound((await spec.endpoints(p)).token, {
    method: "POST",
    headers,
    body: form.toString(),
  });
  if (res.status < 200 || res.status >= 300) throw new Error(`token endpoint answered ${res.status}`);
  return parseTokens(res.text, res.contentType);
}

/** What the provider says of its user, with its tokens. */
export async function providerUser(
  spec: ProviderSpec,
  p: ConfiguredProvider,
  tokens: ProviderTokens,
  callback: Record<string, unknown>,
): Promise<ProviderUser> {
  return spec.user({
    p,
    tokens,
    callback,
    get: spec.oauth1
      ? (url) => signedGet(p, tokens, url)
      : (url, headers = {}) =>
          fetchPublicJson(url, { headers: { ...headers, authorization: `Bearer ${tokens.access_token}` } }),
  });
}

/**
 * The identity's data (identity_data, and the user's metadata) as the platform stores its Claims: the
 * primary address (else the last) as `email` and `email_verified`, empty claims left out.
 */
export function identityData(user: ProviderUser): Record<string, unknown> {
  const chosen = user.emails.find((e) => e.primary) ?? user.emails.at(-1);
  const data: Record<string, unknown> = {
    ...user.claims,
    email: chosen?.email ?? user.claims.email,
    email_verified: chosen ? chosen.verified : false,
    phone_verified: user.claims.phone_verified === true,
  };
  for (const [k, v] of Object.entries(data)) {
    const empty =
      v === undefined ||
      v === null ||
      v === "" ||
      (typeof v === "object" && !Array.isArray(v) && Object.keys(v as object).length === 0);
    if (empty) delete data[k];
  }
  return data;
}
