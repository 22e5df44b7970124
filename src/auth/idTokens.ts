import { createHash } from "node:crypto";
import { decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload } from "jose";
import { issuerKeySet } from "./thirdParty";

/**
 * OpenID Connect ID tokens of the sign-in providers (provider/oidc.go of the platform's auth server): verified
 * against their issuer's published keys, and read into the user data the provider gives (its addresses and
 * the identity's claims) by the provider's own mapping.
 */

/** An address a provider vouches for (or not), as provider.Email. */
export interface ProviderEmail {
  email: string;
  verified: boolean;
  primary: boolean;
}

/** What a provider says of its user: its addresses and the identity's claims (identity_data). */
export interface ProviderUser {
  emails: ProviderEmail[];
  claims: Record<string, unknown>;
}

/** Why an ID token was refused (the callers answer it in their own words). */
export class IdTokenError extends Error {}

/** The issuer an ID token names, before any check: which issuer's keys to verify it with. */
export function claimedIssuer(token: string): string {
  try {
    const iss = decodeJwt(token).iss;
    if (typeof iss === "string" && iss) return iss;
  } catch {
    // not a JWT: refused below
  }
  throw new IdTokenError("Unable to detect issuer in ID token");
}

/** The hash an ID token's `at_hash` holds of its access token: the left half of the digest of its alg. */
function accessTokenHash(alg: string, accessToken: string): string {
  const bits = /(384|512)$/.exec(alg)?.[1] ?? "256";
  const digest = createHash(`sha${bits}`).update(accessToken).digest();
  return digest.subarray(0, digest.length / 2).toString("base64url");
}

/**
 * An ID token verified: signed by a key of `issuer`'s JWKS (discovered, through the outbound policy), issued
 * by it unless `anyIssuer` (Apple's two issuer names), not expired; its `at_hash` matched when an access token
 * is given. Audience and nonce are the caller's to check.
 */
export async function verifyIdToken(
  token: string,
  issuer: string,
  options: { anyIssuer?: boolean; accessToken?: string } = {},
): Promise<JWTPayload> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, await issuerKeySet(issuer), {
      issuer: options.anyIssuer ? undefined : issuer,
    }));
  } catch (e) {
    throw new IdTokenError(`ID token not valid: ${(e as Error).message}`);
  }
  if (options.accessToken && typeof payload.at_hash === "string") {
    const { alg } = decodeProtectedHeader(token);
    if (payload.at_hash !== accessTokenHash(String(alg), options.accessToken)) {
      throw new IdTokenError("ID token access token hash does not match the access token");
    }
  }
  if (typeof payload.sub !== "string" || !payload.sub)
    throw new IdTokenError("Missing sub claim in id_token");
  return payload;
}

const str = (v: unknown) => (typeof v === "string" ? v : "");
const primary = (email: string, verified: boolean): ProviderEmail[] =>
  email ? [{ email, verified, primary: true }] : [];

/** How each provider's ID token claims become its user data (the platform's parse<Provider>IDToken). */
export type IdTokenMapping = (c: JWTPayload) => ProviderUser;

const AZURE_CLAIMS_NOT_CUSTOM = new Set([
  "aud",
  "iss",
  "iat",
  "nbf",
  "exp",
  "c_hash",
  "at_hash",
  "aio",
  "nonce",
  "rh",
  "uti",
  "jti",
  "ver",
  "sub",
  "name",
  "preferred_username",
]);

/** The claims of the platform's provider.Claims, kept from a generic ID token or userinfo answer. */
export const STANDARD_CLAIMS = new Set([
  "iss",
  "sub",
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
  "email",
  "email_verified",
  "phone",
  "phone_verified",
  "custom_claims",
  "full_name",
  "avatar_url",
  "slug",
  "provider_id",
  "user_name",
]);

export const ID_TOKEN_MAPPINGS = {
  google: (c) => ({
    emails: primary(str(c.email), c.email_verified === true || c.verified_email === true),
    claims: {
      iss: c.iss,
      sub: c.sub,
      name: c.name,
      picture: c.picture,
      avatar_url: c.picture,
      full_name: c.name,
      provider_id: c.sub,
      ...(c.hd ? { custom_claims: { hd: c.hd } } : {}),
    },
  }),
  apple: (c) => {
    const custom = Object.fromEntries(
      ["is_private_email", "auth_time", "transfer_sub"]
        .filter((k) => c[k] !== undefined)
        .map((k) => [k, c[k]]),
    );
    return {
      emails: [{ email: str(c.email), verified: true, primary: true }],
      claims: {
        iss: c.iss,
        sub: c.sub,
        provider_id: c.sub,
        ...(Object.keys(custom).length ? { custom_claims: custom } : {}),
      },
    };
  },
  azure: (c) => {
    const edov = c.xms_edov;
    const verified =
      str(c.email) !== "" && (edov === undefined || edov === true || edov === "1" || edov === "true");
    return {
      emails: primary(str(c.email), verified),
      claims: {
        iss: c.iss,
        sub: c.sub,
        provider_id: c.sub,
        preferred_username: c.preferred_username,
        full_name: c.name,
        custom_claims: Object.fromEntries(Object.entries(c).filter(([k]) => !AZURE_CLAIMS_NOT_CUSTOM.has(k))),
      },
    };
  },
  kakao: (c) => ({
    emails: primary(str(c.email), true),
    claims: {
      iss: c.iss,
      sub: c.sub,
      name: c.nickname,
      preferred_username: c.nickname,
      provider_id: c.sub,
      picture: c.picture,
    },
  }),
  facebook: (c) => ({
    emails: primary(str(c.email), true),
    claims: {
      iss: c.iss,
      sub: c.sub,
      name: c.name,
      picture: c.picture,
      provider_id: c.sub,
      email: c.email,
      email_verified: str(c.email) !== "",
    },
  }),
  linkedin_oidc: (c) => ({
    emails: primary(str(c.email), c.email_verified === true || c.email_verified === "true"),
    claims: {
      iss: c.iss,
      sub: c.sub,
      name: `${str(c.given_name)} ${str(c.family_name)}`.trim(),
      given_name: c.given_name,
      family_name: c.family_name,
      locale: c.locale,
      picture: c.picture,
      provider_id: c.sub,
    },
  }),
  /** Any other issuer: its standard claims (those of the platform's Claims). */
  generic: (c) => ({
    emails: primary(str(c.email), c.email_verified === true),
    claims: Object.fromEntries(Object.entries(c).filter(([k]) => STANDARD_CLAIMS.has(k))),
  }),
} satisfies Record<string, IdTokenMapping>;
