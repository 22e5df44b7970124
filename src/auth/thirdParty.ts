import { createLocalJWKSet, createRemoteJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from "jose";
import type pg from "pg";

/** Fetched key sets are kept at most 10 minutes; an unknown `kid` refetches sooner (jose's cooldown). */
const JWKS_MAX_AGE_MS = 10 * 60 * 1000;
const DISCOVERY_MAX_AGE_MS = 10 * 60 * 1000;

export interface ThirdPartyRow {
  id: string;
  type: string;
  oidc_issuer_url: string | null;
  jwks_url: string | null;
  custom_jwks: JSONWebKeySet | null;
}

const remoteSets = new Map<string, JWTVerifyGetKey>();
const discovered = new Map<string, { jwksUri: string; at: number }>();

function remoteSet(url: string): JWTVerifyGetKey {
  let set = remoteSets.get(url);
  if (!set) {
    set = createRemoteJWKSet(new URL(url), { cacheMaxAge: JWKS_MAX_AGE_MS, timeoutDuration: 5000 });
    remoteSets.set(url, set);
  }
  return set;
}

/** The `jwks_uri` of an OIDC issuer, from its discovery document. */
export async function discoverJwksUri(issuer: string): Promise<string> {
  const cached = discovered.get(issuer);
  if (cached && Date.now() - cached.at < DISCOVERY_MAX_AGE_MS) return cached.jwksUri;
  const res = await fetch(new URL(".well-known/openid-configuration", issuer.replace(/\/?$/, "/")), {
    signal: AbortSignal.timeout(5000),
  });
  if (!res.ok) throw new Error(`OIDC discovery answered ${res.status}`);
  const doc = (await res.json()) as { jwks_uri?: unknown };
  if (typeof doc.jwks_uri !== "string") throw new Error("OIDC discovery document has no jwks_uri");
  discovered.set(issuer, { jwksUri: doc.jwks_uri, at: Date.now() });
  return doc.jwks_uri;
}

/** The key resolver of an integration: its custom JWKS, its JWKS URL or its issuer's JWKS. */
export async function keySetOf(row: ThirdPartyRow): Promise<JWTVerifyGetKey> {
  if (row.custom_jwks) return createLocalJWKSet(row.custom_jwks);
  if (row.jwks_url) return remoteSet(row.jwks_url);
  return remoteSet(await discoverJwksUri(row.oidc_issuer_url!));
}

/** Fetches an integration's key set once, for `resolved_jwks`; null when it cannot be resolved. */
export async function resolveJwks(row: Omit<ThirdPartyRow, "id" | "type">): Promise<JSONWebKeySet | null> {
  if (row.custom_jwks) return row.custom_jwks;
  try {
    const url = row.jwks_url ?? (await discoverJwksUri(row.oidc_issuer_url!));
    const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
    if (!res.ok) return null;
    const set = (await res.json()) as JSONWebKeySet;
    return Array.isArray(set?.keys) ? set : null;
  } catch {
    return null;
  }
}

export async function thirdPartyIntegrations(platformPool: pg.Pool, ref: string): Promise<ThirdPartyRow[]> {
  const { rows } = await platformPool.query(
    "select id, type, oidc_issuer_url, jwks_url, custom_jwks from platform.third_party_auth where project_ref = $1",
    [ref],
  );
  return rows;
}
