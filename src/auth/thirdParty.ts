import { createLocalJWKSet, errors as joseErrors, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import type pg from "pg";
import { fetchPublicJson } from "../net/outbound";

/** Fetched key sets are kept at most 10 minutes; an unknown `kid` refetches, at most every 30 seconds. */
const JWKS_MAX_AGE_MS = 10 * 60 * 1000;
const JWKS_COOLDOWN_MS = 30 * 1000;
const DISCOVERY_MAX_AGE_MS = 10 * 60 * 1000;

export interface ThirdPartyRow {
  id: string;
  type: string;
  oidc_issuer_url: string | null;
  jwks_url: string | null;
  custom_jwks: JSONWebKeySet | null;
  /** The `aud` its tokens must carry (Strata's addition); null: any. */
  audience: string | null;
}

const remoteSets = new Map<string, JWTVerifyGetKey>();
const discovered = new Map<string, { doc: DiscoveryDocument; at: number }>();

async function fetchKeySet(url: string): Promise<JSONWebKeySet> {
  const set = (await fetchPublicJson(url)) as JSONWebKeySet;
  if (!Array.isArray(set?.keys)) throw new Error(`${url} is not a JSON Web Key Set`);
  return set;
}

/** A remote key set, fetched under the outbound policy (public https only), cached and refetched for an unknown kid. */
function remoteSet(url: string): JWTVerifyGetKey {
  let set = remoteSets.get(url);
  if (set) return set;
  let current: { keys: JWTVerifyGetKey; at: number } | undefined;
  const refresh = async () => {
    current = { keys: createLocalJWKSet(await fetchKeySet(url)), at: Date.now() };
    return current.keys;
  };
  set = async (header, token) => {
    const keys = current && Date.now() - current.at < JWKS_MAX_AGE_MS ? current.keys : await refresh();
    try {
      return await keys(header, token);
    } catch (e) {
      if (!(e instanceof joseErrors.JWKSNoMatchingKey) || Date.now() - current!.at < JWKS_COOLDOWN_MS)
        throw e;
      return (await refresh())(header, token);
    }
  };
  remoteSets.set(url, set);
  return set;
}

/** What Strata reads of an OIDC issuer's discovery document. */
export interface DiscoveryDocument {
  jwks_uri: string;
  authorization_endpoint?: string;
  token_endpoint?: string;
  userinfo_endpoint?: string;
}

/** An OIDC issuer's discovery document (`<issuer>/.well-known/openid-configuration`), kept 10 minutes. */
export async function discoveryDocument(issuer: string): Promise<DiscoveryDocument> {
  const cached = discovered.get(issuer);
  if (cached && Date.now() - cached.at < DISCOVERY_MAX_AGE_MS) return cached.doc;
  const doc = (await fetchPublicJson(
    new URL(".well-known/openid-configuration", issuer.replace(/\/?$/, "/")).href,
  )) as DiscoveryDocument;
  if (typeof doc?.jwks_uri !== "string") throw new Error("OIDC discovery document has no jwks_uri");
  discovered.set(issuer, { doc, at: Date.now() });
  return doc;
}

/** The `jwks_uri` of an OIDC issuer, from its discovery document. */
export async function discoverJwksUri(issuer: string): Promise<string> {
  return (await discoveryDocument(issuer)).jwks_uri;
}

/** The key resolver of an OIDC issuer: its discovered JWKS, cached and refetched for an unknown kid. */
export async function issuerKeySet(issuer: string): Promise<JWTVerifyGetKey> {
  return remoteSet(await discoverJwksUri(issuer));
}

/** The key resolver of an integration: its custom JWKS, its JWKS URL or its issuer's JWKS. */
export async function keySetOf(row: ThirdPartyRow): Promise<JWTVerifyGetKey> {
  if (row.custom_jwks) return createLocalJWKSet(row.custom_jwks);
  if (row.jwks_url) return remoteSet(row.jwks_url);
  return remoteSet(await discoverJwksUri(row.oidc_issuer_url!));
}

/** Fetches an integration's key set once, for `resolved_jwks`; null when it cannot be resolved. */
export async function resolveJwks(
  row: Omit<ThirdPartyRow, "id" | "type" | "audience">,
): Promise<JSONWebKeySet | null> {
  if (row.custom_jwks) return row.custom_jwks;
  try {
    return await fetchKeySet(row.jwks_url ?? (await discoverJwksUri(row.oidc_issuer_url!)));
  } catch {
    return null;
  }
}

export async function thirdPartyIntegrations(platformPool: pg.Pool, ref: string): Promise<ThirdPartyRow[]> {
  const { rows } = await platformPool.query(
    `select id, type, oidc_issuer_url, jwks_url, custom_jwks, audience
       from platform.third_party_auth where project_ref = $1`,
    [ref],
  );
  return rows;
}
