import { randomBytes } from "node:crypto";
import { exportJWK, generateKeyPair, importJWK, type JWK, type KeyLike } from "jose";
import type pg from "pg";
import type { KeyEncryptionKey } from "../platform/kek";

export const SIGNING_ALGORITHMS = ["ES256", "RS256", "HS256", "EdDSA"] as const;
export type SigningAlgorithm = (typeof SIGNING_ALGORITHMS)[number];
export type SigningKeyStatus = "in_use" | "standby" | "previously_used" | "revoked";

/** Members of a JWK that belong to the private key: never part of a public JWK. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

export interface SigningKeyRow {
  id: string;
  project_ref: string;
  algorithm: SigningAlgorithm;
  status: SigningKeyStatus;
  /** Sealed with the key-encryption key (a JSON string); a plain JWK only before start-up sealed it. */
  private_jwk: JWK | string;
  public_jwk: JWK | null;
  is_legacy: boolean;
  revoked_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The public half of a JWK, labelled for verification; null for a symmetric key. */
export function publicJwkOf(jwk: JWK, kid: string, alg: string): JWK | null {
  if (jwk.kty === "oct") return null;
  const pub = Object.fromEntries(Object.entries(jwk).filter(([k]) => !PRIVATE_MEMBERS.includes(k)));
  return { ...pub, kty: jwk.kty, kid, alg, use: "sig", key_ops: ["verify"] };
}

/** Generates the private JWK of a new key. */
export async function generatePrivateJwk(algorithm: SigningAlgorithm): Promise<JWK> {
  if (algorithm === "HS256") return { kty: "oct", k: randomBytes(32).toString("base64url") };
  const { privateKey } = await generateKeyPair(algorithm, {
    extractable: true,
    ...(algorithm === "EdDSA" ? { crv: "Ed25519" } : {}),
  });
  return exportJWK(privateKey);
}

/** Checks that an imported private JWK is a private key of `algorithm` (throws a message otherwise). */
export async function checkPrivateJwk(algorithm: SigningAlgorithm, jwk: JWK): Promise<void> {
  const expectedKty = { ES256: "EC", RS256: "RSA", HS256: "oct", EdDSA: "OKP" }[algorithm];
  if (jwk.kty !== expectedKty) throw new Error(`private_jwk must have kty ${expectedKty} for ${algorithm}`);
  if (algorithm === "HS256" ? !jwk.k : !jwk.d) throw new Error("private_jwk does not contain a private key");
  await importJWK(jwk, algorithm);
}

/** The key that signs a row's tokens (private) or verifies them (public, or the shared secret). */
/** Purpose of the sealed private JWKs (see platform/kek.ts). */
export const PRIVATE_JWK = "platform.signing_keys.private_jwk";

/** A stored private JWK: sealed (a JSON string), or plain from before sealing. */
export function openPrivateJwk(stored: JWK | string, kek: KeyEncryptionKey): JWK {
  return typeof stored === "string" ? (JSON.parse(kek.open(stored, PRIVATE_JWK)) as JWK) : stored;
}

export async function keyOf(
  row: SigningKeyRow,
  use: "sign" | "verify",
  kek: KeyEncryptionKey,
): Promise<KeyLike | Uint8Array> {
  const jwk = use === "sign" || !row.public_jwk ? openPrivateJwk(row.private_jwk, kek) : row.public_jwk;
  const { kid: _kid, key_ops: _ops, use: _use, ...material } = jwk;
  return importJWK({ ...material, alg: row.algorithm }, row.algorithm);
}

/** The project's key that may verify a token with `kid` (anything not revoked: in_use, standby, previously_used). */
export async function verifyingKey(
  platformPool: pg.Pool,
  ref: string,
  kid: string,
): Promise<SigningKeyRow | undefined> {
  const { rows } = await platformPool.query(
    `select * from platform.signing_keys
      where project_ref = $1 and id::text = $2 and status in ('in_use', 'standby', 'previously_used')`,
    [ref, kid],
  );
  return rows[0];
}

/** The project's `in_use` key, which signs the tokens Strata issues; undefined: the JWT secret signs. */
export async function inUseKey(platformPool: pg.Pool, ref: string): Promise<SigningKeyRow | undefined> {
  const { rows } = await platformPool.query(
    "select * from platform.signing_keys where project_ref = $1 and status = 'in_use'",
    [ref],
  );
  return rows[0];
}

/** Public JWKs of the project's asymmetric keys that verify tokens (JWKS endpoint). */
export async function publishedJwks(platformPool: pg.Pool, ref: string): Promise<JWK[]> {
  const { rows } = await platformPool.query(
    `select public_jwk from platform.signing_keys
      where project_ref = $1 and status in ('in_use', 'standby', 'previously_used') and public_jwk is not null
      order by created_at`,
    [ref],
  );
  return rows.map((r) => r.public_jwk);
}
