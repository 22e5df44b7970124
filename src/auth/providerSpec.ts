import {
  IdTokenError,
  verifyIdToken,
  type IdTokenMapping,
  type ProviderEmail,
  type ProviderUser,
} from "./idTokens";
import { discoveryDocument } from "./thirdParty";

/**
 * What an OAuth provider of src/auth/providerTable.ts is made of, and the helpers its entries share. Each provider's hosts come from its `external_<name>_url` slot where
 * the platform has one (azure, gitlab, keycloak, workos), else from the operator's
 * STRATA_AUTH_PROVIDER_BASE_<NAME>, else the public hosts. Every URL is reached through the outbound policy.
 */

/** A provider as the project configured it. */
export interface ConfiguredProvider {
  name: string;
  /** The client id the sign-in uses (the first of `client_id`). */
  clientId: string;
  /** Every client id an ID token may be issued to: client_id, then additional_client_ids. */
  clientIds: string[];
  secret: string;
  /** The base URL of all the provider's hosts, when set. */
  base: string | undefined;
  emailOptional: boolean;
  skipNonceCheck: boolean;
}

/** A provider's token endpoint answer. */
export interface ProviderTokens {
  access_token: string;
  refresh_token?: string;
  id_token?: string;
  [extra: string]: unknown;
}

export interface Exchange {
  p: ConfiguredProvider;
  tokens: ProviderTokens;
  /** The callback's own parameters (Apple's `user`). */
  callback: Record<string, unknown>;
  /** GETs JSON with the provider's access token. */
  get(url: string, headers?: Record<string, string>): Promise<any>;
}

export interface Endpoints {
  authorize: string;
  token: string;
}

export interface ProviderSpec {
  /** Whether the base URL is the project's `external_<name>_url` (required: keycloak). */
  urlSlot?: "optional" | "required";
  /** Scopes always asked for; `fixedScopes`: the caller's are not added. */
  scopes: string[];
  fixedScopes?: true;
  endpoints(p: ConfiguredProvider): Endpoints | Promise<Endpoints>;
  /** Extra parameters of the authorize URL. */
  authorizeParams?: Record<string, string>;
  /** The client's credentials sent in the token request's body instead of Basic authentication. */
  credentialsInBody?: true;
  /** The provider requires PKCE of its own client (X): a verifier per sign-in, kept in the sealed state. */
  requiresPkce?: true;
  /**
   * An OAuth 1.0a provider (Twitter): where its request token is got; `endpoints` are its authenticate and
   * access token URLs, and its API is asked with signed requests instead of a bearer token.
   */
  oauth1?: { requestToken(p: ConfiguredProvider): string };
  user(x: Exchange): Promise<ProviderUser>;
  /** Signing in with the provider's ID token (grant_type=id_token): its issuer and claim mapping. */
  idToken?: { issuer(p: ConfiguredProvider): string; mapping: IdTokenMapping };
}

/** The base of a provider's host: the configured base, else https://<host>. */
export const host = (p: ConfiguredProvider, defaultHost: string) => p.base ?? `https://${defaultHost}`;
export const str = (v: unknown) => (typeof v === "string" ? v : "");
export const primary = (email: unknown, verified: boolean): ProviderEmail[] =>
  str(email) ? [{ email: str(email), verified, primary: true }] : [];
export const fullName = (first: unknown, last: unknown) => `${str(first)} ${str(last)}`.trim();

/** An ID token of a provider's token answer, verified against `issuer` for the configured client. */
export async function idTokenUser(
  x: Exchange,
  issuer: string,
  mapping: IdTokenMapping,
  options: { anyIssuer?: boolean } = {},
): Promise<ProviderUser> {
  const claims = await verifyIdToken(String(x.tokens.id_token), issuer, {
    anyIssuer: options.anyIssuer,
    accessToken: x.tokens.access_token,
  });
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!aud.includes(x.p.clientId)) throw new IdTokenError("ID token not issued to this client");
  return mapping(claims);
}

export const GOOGLE_ISSUER = "https://accounts.google.com";
export const APPLE_ISSUERS = ["https://appleid.apple.com", "https://account.apple.com"];
export const AZURE_ISSUER = /^https:\/\/login[.]microsoftonline[.]com\/([^/]+)\/v2[.]0\/?$/;
export const AZURE_CIAM_ISSUER = /^https:\/\/[a-z0-9-]+[.]ciamlogin[.]com\/([^/]+)\/v2[.]0\/?$/;
export const AZURE_MULTI_TENANT = [
  "https://login.microsoftonline.com/common/v2.0",
  "https://login.microsoftonline.com/organizations/v2.0",
];

export const googleIssuer = (p: ConfiguredProvider) => p.base ?? GOOGLE_ISSUER;
export const appleIssuer = (p: ConfiguredProvider) => p.base ?? APPLE_ISSUERS[0];

/**
 * The issuer an Azure ID token may have: the configured tenant's (`<url>/v2.0`) when a single tenant is set,
 * else any Microsoft identity platform tenant.
 */
export function azureIssuerAllowed(p: ConfiguredProvider, issuer: string): boolean {
  const expected = p.base ? `${p.base}/v2.0` : "";
  if (expected && !AZURE_MULTI_TENANT.includes(expected)) return issuer === expected;
  return AZURE_ISSUER.test(issuer) || AZURE_CIAM_ISSUER.test(issuer);
}

/** The endpoints of an OIDC issuer, from its discovery document. */
export async function discovered(issuer: string): Promise<Endpoints> {
  const doc = await discoveryDocument(issuer);
  if (!doc.authorization_endpoint || !doc.token_endpoint) {
    throw new Error("The provider's discovery document has no endpoints");
  }
  return { authorize: doc.authorization_endpoint, token: doc.token_endpoint };
}

export const githubApi = (p: ConfiguredProvider) => {
  const api = host(p, "api.github.com");
  return api.endsWith("api.github.com") ? api : `${api}/api/v3`;
};
