import type pg from "pg";
import { fetchPublicJson } from "../net/outbound";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";
import {
  ID_TOKEN_MAPPINGS,
  IdTokenError,
  STANDARD_CLAIMS,
  verifyIdToken,
  type IdTokenMapping,
  type ProviderUser,
} from "./idTokens";
import type { ConfiguredProvider, Endpoints, ProviderSpec } from "./providerSpec";
import { customProviderOf, type CustomProviderRow } from "./store/customProviders";
import { discoveryDocument, type DiscoveryDocument } from "./thirdParty";

/**
 * Custom OAuth 2.0 / OIDC providers (custom_oauth_enabled; `custom:<name>`), as the platform's auth server
 * has them (internal/api/provider/custom_oauth.go): an OIDC provider's endpoints come from its discovery
 * document (its `discovery_url`, else its issuer's), its user from the ID token (signature against the
 * issuer's keys, audience = client_id or acceptable_client_ids) or else its userinfo endpoint; an OAuth 2.0
 * provider's from its configured URLs. The allowlisted raw claims go to `custom_claims`, then
 * `attribute_mapping` sets a claim from another (`{"email": "mail"}`) or to a constant.
 */

/** An OIDC provider's discovery document: from `discovery_url` when set, else from its issuer. */
export async function customDiscovery(
  issuer: string,
  discoveryUrl: string | null,
): Promise<DiscoveryDocument & { issuer?: string }> {
  if (!discoveryUrl) return discoveryDocument(issuer);
  const doc = (await fetchPublicJson(discoveryUrl)) as DiscoveryDocument;
  if (typeof doc?.jwks_uri !== "string") throw new Error("OIDC discovery document has no jwks_uri");
  return doc;
}

/**
 * Claims `attribute_mapping` may not set, as the platform blocks them: system fields, and the verification
 * states (set from a constant, an unverified address would link to an existing account).
 */
export const UNMAPPABLE_CLAIMS = new Set([
  "id",
  "aud",
  "role",
  "app_metadata",
  "created_at",
  "updated_at",
  "confirmed_at",
  "email_confirmed_at",
  "phone_confirmed_at",
  "email_verified",
  "phone_verified",
  "banned_until",
  "is_super_admin",
]);

/** The user data of a custom provider's claims (an ID token's or a userinfo answer). */
export function customUser(raw: Record<string, unknown>, row: CustomProviderRow): ProviderUser {
  const claims: Record<string, unknown> = { ...ID_TOKEN_MAPPINGS.generic(raw).claims };
  for (const key of row.custom_claims_allowlist) {
    if (Object.hasOwn(raw, key)) {
      claims.custom_claims = { ...(claims.custom_claims as object | undefined), [key]: raw[key] };
    }
  }
  for (const [target, source] of Object.entries(row.attribute_mapping)) {
    if (!STANDARD_CLAIMS.has(target) || UNMAPPABLE_CLAIMS.has(target)) continue;
    if (typeof source !== "string") claims[target] = source;
    else if (Object.hasOwn(raw, source)) claims[target] = raw[source];
    else if (Object.hasOwn(claims, source)) claims[target] = claims[source];
  }
  const email = typeof claims.email === "string" ? claims.email : "";
  return {
    emails: email ? [{ email, verified: claims.email_verified === true, primary: true }] : [],
    claims,
  };
}

function specOf(row: CustomProviderRow): ProviderSpec {
  const oidc = row.provider_type === "oidc";
  const discovery = () => customDiscovery(row.issuer ?? "", row.discovery_url);
  return {
    scopes: oidc && !row.scopes.includes("openid") ? ["openid", ...row.scopes] : row.scopes,
    authorizeParams: row.authorization_params,
    requiresPkce: row.pkce_enabled ? true : undefined,
    async endpoints(): Promise<Endpoints> {
      if (!oidc) return { authorize: row.authorization_url ?? "", token: row.token_url ?? "" };
      const doc = await discovery();
      if (!doc.authorization_endpoint || !doc.token_endpoint) {
        throw new Error("The provider's discovery document has no endpoints");
      }
      return { authorize: doc.authorization_endpoint, token: doc.token_endpoint };
    },
    async user(x) {
      if (oidc && typeof x.tokens.id_token === "string" && x.tokens.id_token) {
        const claims = await verifyIdToken(x.tokens.id_token, row.issuer ?? "");
        const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
        if (!aud.some((a) => typeof a === "string" && x.p.clientIds.includes(a))) {
          throw new IdTokenError("ID token not issued to this client");
        }
        return customUser(claims, row);
      }
      const userinfo = oidc ? (await discovery()).userinfo_endpoint : row.userinfo_url;
      if (!userinfo) throw new Error("no ID token or userinfo endpoint available");
      return customUser((await x.get(userinfo)) as Record<string, unknown>, row);
    },
  };
}

/** A custom provider as the sign-in flows take a configured one. */
const configuredOf = (row: CustomProviderRow): ConfiguredProvider => ({
  name: row.identifier,
  clientId: row.client_id,
  clientIds: [row.client_id, ...row.acceptable_client_ids],
  secret: row.client_secret,
  base: undefined,
  emailOptional: row.email_optional,
  skipNonceCheck: row.skip_nonce_check,
});

/**
 * A custom OIDC provider's ID token sign-in (grant_type=id_token, provider `custom:<name>`), as the
 * platform's token_oidc.go: its issuer, its client ids as the audience, its claim mapping.
 */
export async function customIdToken(
  db: pg.Pool,
  settings: AuthSettings,
  identifier: string,
): Promise<{ p: ConfiguredProvider; issuer: string; mapping: IdTokenMapping }> {
  if (settings.custom_oauth_enabled !== true) {
    throw new AuthApiError(400, "validation_failed", "Custom OAuth providers are disabled");
  }
  const row = await customProviderOf(db, identifier);
  if (!row) throw new AuthApiError(400, "validation_failed", `Custom provider "${identifier}" not found`);
  if (!row.enabled) {
    throw new AuthApiError(400, "provider_disabled", `Custom provider "${identifier}" is disabled`);
  }
  if (row.provider_type !== "oidc" || !row.issuer) {
    throw new AuthApiError(400, "validation_failed", `Provider "${identifier}" is not an OIDC provider`);
  }
  return { p: configuredOf(row), issuer: row.issuer, mapping: (claims) => customUser(claims, row) };
}

const unsupported = () =>
  new AuthApiError(400, "validation_failed", "Unsupported provider: provider is not enabled");

/** The custom provider `identifier` of the project, refused (400) when custom providers or it are off. */
export async function customProvider(
  db: pg.Pool,
  settings: AuthSettings,
  identifier: string,
): Promise<{ spec: ProviderSpec; p: ConfiguredProvider }> {
  if (settings.custom_oauth_enabled !== true) throw unsupported();
  const row = await customProviderOf(db, identifier);
  if (!row?.enabled) throw unsupported();
  return { spec: specOf(row), p: configuredOf(row) };
}
