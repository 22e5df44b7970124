import { isIP } from "node:net";
import { z } from "zod";
import type { AuthCall } from "../call";
import { customDiscovery, UNMAPPABLE_CLAIMS } from "../customProviders";
import { AuthApiError } from "../errors";
import { parse } from "../input";
import {
  countCustomProviders,
  customProviderOf,
  customProviders,
  deleteCustomProvider,
  insertCustomProvider,
  updateCustomProvider,
  type CustomProviderFields,
  type CustomProviderRow,
} from "../store/customProviders";

/**
 * /admin/custom-providers (service role; custom_oauth_enabled): the project's custom OAuth 2.0 and OIDC
 * providers, as auth-js `auth.admin.customProviders` manages them. An OIDC provider's discovery document is
 * read (under the outbound policy) and checked when it is saved, and kept with it. The client secret is
 * never answered.
 */

/** Parameters of the authorize URL that Strata sets itself: a provider's may not override them. */
const RESERVED_PARAMS = [
  "client_id",
  "client_secret",
  "redirect_uri",
  "response_type",
  "state",
  "code_challenge",
  "code_challenge_method",
  "code_verifier",
  "nonce",
];

const body = z.object({
  provider_type: z.string().optional(),
  identifier: z.string().optional(),
  name: z.string().max(100).optional(),
  client_id: z.string().max(512).optional(),
  client_secret: z.string().optional(),
  acceptable_client_ids: z.array(z.string()).optional(),
  scopes: z.array(z.string()).optional(),
  pkce_enabled: z.boolean().optional(),
  attribute_mapping: z.record(z.string(), z.unknown()).optional(),
  custom_claims_allowlist: z.array(z.string().min(1)).optional(),
  authorization_params: z.record(z.string(), z.unknown()).optional(),
  enabled: z.boolean().optional(),
  email_optional: z.boolean().optional(),
  issuer: z.string().optional(),
  discovery_url: z.string().nullish(),
  skip_nonce_check: z.boolean().optional(),
  authorization_url: z.string().optional(),
  token_url: z.string().optional(),
  userinfo_url: z.string().optional(),
  jwks_uri: z.string().nullish(),
});
type Body = z.infer<typeof body>;

const invalid = (message: string) => new AuthApiError(400, "validation_failed", message);

function requireEnabled(call: AuthCall) {
  if (call.settings.custom_oauth_enabled !== true) {
    throw new AuthApiError(404, "feature_disabled", "Custom OAuth providers are disabled");
  }
}

/** A provider as the admin API answers it: no secret; an OIDC provider's discovery document. */
function toApi(row: CustomProviderRow) {
  const { client_secret: _secret, cached_discovery, ...rest } = row;
  return {
    ...Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== null)),
    ...(cached_discovery ? { discovery_document: cached_discovery } : {}),
  };
}

/**
 * An endpoint's URL: https (plain http only to this machine's loopback, which the outbound policy reaches
 * only where the operator allowed it, as in tests), at most 2048 characters.
 */
function checkedUrl(field: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(`${field} must be a valid URL`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const loopback = host === "localhost" || (isIP(host) !== 0 && /^(127\.|::1$)/.test(host));
  if (url.protocol !== "https:" && !(url.protocol === "http:" && loopback)) {
    throw invalid(`${field} must use https`);
  }
  if (value.length > 2048) throw invalid(`${field} must be at most 2048 characters`);
  return value;
}

/** The identifier of the path (`:identifier`), which must be a custom one. */
function identifierOf(call: AuthCall): string {
  const identifier = String(call.req.params.identifier ?? "");
  if (!identifier.startsWith("custom:")) {
    throw invalid(`identifier must start with 'custom:' prefix, e.g. 'custom:${identifier}'`);
  }
  return identifier;
}

/** The fields of a provider: `b` over `current` (an update) or over the defaults (a new one), checked. */
async function fieldsOf(b: Body, current?: CustomProviderRow): Promise<CustomProviderFields> {
  const type = current?.provider_type ?? b.provider_type;
  if (type !== "oauth2" && type !== "oidc") throw invalid("provider_type must be either 'oauth2' or 'oidc'");
  const identifier = current?.identifier ?? b.identifier ?? "";
  if (!identifier) throw invalid("identifier is required");
  if (!identifier.startsWith("custom:")) {
    throw invalid(`identifier must start with 'custom:' prefix, e.g. 'custom:${identifier}'`);
  }
  if (!/^[a-z0-9][a-z0-9:-]{0,48}[a-z0-9]$/.test(identifier)) {
    throw invalid("identifier must be lowercase letters, digits and hyphens (at most 50 characters)");
  }
  for (const target of Object.keys(b.attribute_mapping ?? {})) {
    if (UNMAPPABLE_CLAIMS.has(target)) throw invalid(`Cannot map to protected field: ${target}`);
  }
  for (const [key, value] of Object.entries(b.authorization_params ?? {})) {
    if (RESERVED_PARAMS.includes(key)) throw invalid(`Cannot override reserved OAuth parameter: ${key}`);
    if (typeof value !== "string") throw invalid(`Authorization parameter "${key}" must be a string`);
  }
  const url = (field: string, value: string | null | undefined, kept: string | null | undefined) =>
    value ? checkedUrl(field, value) : (kept ?? null);
  const f: CustomProviderFields = {
    provider_type: type,
    identifier,
    name: b.name ?? current?.name ?? "",
    client_id: b.client_id ?? current?.client_id ?? "",
    client_secret: b.client_secret || current?.client_secret || "",
    acceptable_client_ids: b.acceptable_client_ids ?? current?.acceptable_client_ids ?? [],
    scopes: b.scopes ?? current?.scopes ?? [],
    pkce_enabled: b.pkce_enabled ?? current?.pkce_enabled ?? true,
    attribute_mapping: b.attribute_mapping ?? current?.attribute_mapping ?? {},
    custom_claims_allowlist: b.custom_claims_allowlist ?? current?.custom_claims_allowlist ?? [],
    authorization_params:
      (b.authorization_params as Record<string, string> | undefined) ?? current?.authorization_params ?? {},
    enabled: b.enabled ?? current?.enabled ?? true,
    email_optional: b.email_optional ?? current?.email_optional ?? false,
    issuer: type === "oidc" ? url("issuer", b.issuer, current?.issuer) : null,
    discovery_url: type === "oidc" ? url("discovery_url", b.discovery_url, current?.discovery_url) : null,
    skip_nonce_check: b.skip_nonce_check ?? current?.skip_nonce_check ?? false,
    cached_discovery: null,
    authorization_url:
      type === "oauth2" ? url("authorization_url", b.authorization_url, current?.authorization_url) : null,
    token_url: type === "oauth2" ? url("token_url", b.token_url, current?.token_url) : null,
    userinfo_url: type === "oauth2" ? url("userinfo_url", b.userinfo_url, current?.userinfo_url) : null,
    jwks_uri: type === "oauth2" ? url("jwks_uri", b.jwks_uri, current?.jwks_uri) : null,
  };
  if (!f.name) throw invalid("name is required");
  if (!f.client_id) throw invalid("client_id is required");
  if (!f.client_secret) throw invalid("client_secret is required");
  if (type === "oidc") {
    if (!f.issuer) throw invalid("issuer is required for OIDC providers");
    if (!f.scopes.includes("openid")) f.scopes = ["openid", ...f.scopes];
    f.cached_discovery = await checkedDiscovery(f.issuer, f.discovery_url);
  } else {
    for (const field of ["authorization_url", "token_url", "userinfo_url"] as const) {
      if (!f[field]) throw invalid(`${field} is required for OAuth2 providers`);
    }
  }
  return f;
}

/** An OIDC provider's discovery document, read and checked as it is saved. */
async function checkedDiscovery(issuer: string, discoveryUrl: string | null) {
  let doc: Awaited<ReturnType<typeof customDiscovery>>;
  try {
    doc = await customDiscovery(issuer, discoveryUrl);
  } catch (e) {
    throw invalid(`OIDC discovery failed: ${(e as Error).message}`);
  }
  const missing = ["issuer", "authorization_endpoint", "token_endpoint", "jwks_uri"].filter(
    (k) => typeof (doc as unknown as Record<string, unknown>)[k] !== "string",
  );
  if (missing.length) {
    throw invalid(`OIDC discovery document is missing required fields: ${missing.join(", ")}`);
  }
  if (doc.issuer !== issuer) throw invalid("OIDC discovery document's issuer does not match the issuer");
  return doc as unknown as Record<string, unknown>;
}

const notFound = () => new AuthApiError(404, "custom_provider_not_found", "Custom OAuth provider not found");

/** GET /admin/custom-providers (`?type=oauth2|oidc`). */
export async function list(call: AuthCall) {
  requireEnabled(call);
  const type = call.req.query.type;
  if (type !== undefined && type !== "oauth2" && type !== "oidc") {
    throw invalid("type must be either 'oauth2' or 'oidc'");
  }
  return { providers: (await customProviders(call.project.authPool, type)).map(toApi) };
}

/** GET /admin/custom-providers/:identifier */
export async function get(call: AuthCall) {
  requireEnabled(call);
  const row = await customProviderOf(call.project.authPool, identifierOf(call));
  if (!row) throw notFound();
  return toApi(row);
}

/** POST /admin/custom-providers: a new provider (201), within custom_oauth_max_providers when set. */
export async function create(call: AuthCall) {
  requireEnabled(call);
  const { project, settings, req, res } = call;
  const fields = await fieldsOf(parse(body, req.body));
  const max = Number(settings.custom_oauth_max_providers ?? 0);
  if (max > 0 && (await countCustomProviders(project.authPool)) >= max) {
    throw new AuthApiError(
      400,
      "over_custom_provider_quota",
      "Maximum number of custom OAuth/OIDC providers reached",
    );
  }
  const row = await insertCustomProvider(project.authPool, fields);
  if (!row)
    throw new AuthApiError(400, "conflict", "A custom OAuth provider with this identifier already exists");
  res.status(201);
  return toApi(row);
}

/** PUT /admin/custom-providers/:identifier: the given fields changed (its type and identifier stay). */
export async function update(call: AuthCall) {
  requireEnabled(call);
  const current = await customProviderOf(call.project.authPool, identifierOf(call));
  if (!current) throw notFound();
  const fields = await fieldsOf(parse(body, call.req.body), current);
  return toApi(await updateCustomProvider(call.project.authPool, current.id, fields));
}

/** DELETE /admin/custom-providers/:identifier (204). */
export async function remove(call: AuthCall) {
  requireEnabled(call);
  const current = await customProviderOf(call.project.authPool, identifierOf(call));
  if (!current) throw notFound();
  await deleteCustomProvider(call.project.authPool, current.id);
  call.res.status(204).end();
}
