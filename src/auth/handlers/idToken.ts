import { createHash } from "node:crypto";
import type { JWTPayload } from "jose";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import type { AuthSettings } from "../authConfig";
import type { AuthCall } from "../call";
import { customIdToken } from "../customProviders";
import { AuthApiError } from "../errors";
import { linkExternal, signInExternal } from "../externalAccounts";
import { configuredProvider, identityData } from "../externalProviders";
import { azureIssuerAllowed, type ConfiguredProvider } from "../providerSpec";
import { PROVIDERS } from "../providerTable";
import { afterUserCreated, beforeUserCreated } from "../hook";
import {
  claimedIssuer,
  ID_TOKEN_MAPPINGS,
  IdTokenError,
  verifyIdToken,
  type IdTokenMapping,
} from "../idTokens";
import { parse } from "../input";
import { currentUser } from "../middleware/caller";
import { sessionResponse } from "../signIn";
import { startSession } from "../store/sessions";
import type { UserRow } from "../store/users";
import { requireManualLinking } from "./identities";

/**
 * POST /token?grant_type=id_token (auth-js signInWithIdToken, and linkIdentity with a token): a provider's
 * OpenID Connect ID token signs its user in, as the platform's token_oidc.go: the token verified against its
 * issuer's published keys, issued to one of the provider's client ids (client_id, additional_client_ids),
 * its nonce the SHA-256 of the one the client sent (unless skip_nonce_check, and never for Facebook), its
 * at_hash the access token's when one is sent. A custom OIDC provider (`custom:<name>`) is verified the same
 * way against its issuer and client ids.
 */

const body = z.object({
  id_token: z.string().min(1, { error: "id_token required" }),
  access_token: z.string().optional(),
  nonce: z.string().optional(),
  provider: z.string().optional(),
  client_id: z.string().optional(),
  issuer: z.string().optional(),
  link_identity: z.boolean().optional(),
});

const APPLE_ISSUERS = ["https://appleid.apple.com", "https://account.apple.com"];
const AZURE_ISSUER_PREFIXES = ["https://login.microsoftonline.com/", "https://sts.windows.net/"];

const refused = (message: string) => new AuthApiError(400, "invalid_credentials", message);

interface Verifier {
  p: ConfiguredProvider;
  issuer: string;
  /** Apple names itself by two issuers: the token's is used, after checking it is one of them. */
  anyIssuer: boolean;
  mapping: IdTokenMapping;
  skipNonceCheck: boolean;
}

/** The provider an ID token is for: named by `provider`, or by the issuer the request names. */
function providerName(settings: AuthSettings, params: z.infer<typeof body>): string {
  if (params.provider) return params.provider;
  // The generic OIDC slot's issuer is its realm URL.
  const keycloak = String(settings.external_keycloak_url ?? "").replace(/\/+$/, "");
  if (keycloak && params.issuer?.replace(/\/+$/, "") === keycloak) return "keycloak";
  if (params.issuer && APPLE_ISSUERS.includes(params.issuer)) return "apple";
  if (params.issuer === "https://accounts.google.com") return "google";
  if (params.issuer && AZURE_ISSUER_PREFIXES.some((prefix) => params.issuer!.startsWith(prefix)))
    return "azure";
  if (params.issuer === "https://www.facebook.com") return "facebook";
  if (params.issuer === "https://kauth.kakao.com") return "kakao";
  if (!params.issuer || !params.client_id) {
    throw new AuthApiError(400, "validation_failed", "provider or client_id and issuer required");
  }
  // The platform's operator-allowed issuers (GOTRUE_EXTERNAL_ALLOWED_ID_TOKEN_ISSUERS) are not built.
  throw new AuthApiError(400, "validation_failed", `Custom OIDC provider "${params.issuer}" not allowed`);
}

/** How to verify the request's ID token: the provider's configuration and the issuer it must come from. */
async function verifierOf(call: AuthCall, params: z.infer<typeof body>): Promise<Verifier> {
  if (params.provider?.startsWith("custom:")) {
    const custom = await customIdToken(call.project.authPool, call.settings, params.provider);
    return { ...custom, anyIssuer: false, skipNonceCheck: custom.p.skipNonceCheck };
  }
  const name = providerName(call.settings, params);
  const spec = Object.hasOwn(PROVIDERS, name) ? PROVIDERS[name] : undefined;
  if (!spec || (!spec.idToken && name !== "azure")) {
    throw new AuthApiError(400, "validation_failed", `Custom OIDC provider "${name}" not allowed`);
  }
  if (call.settings[`external_${name}_enabled`] !== true) {
    throw new AuthApiError(400, "provider_disabled", `Provider (issuer "${name}") is not enabled`);
  }
  const { p } = configuredProvider(call.settings, call.ctx.config.authProviderBases, name);
  // Apple and Azure tokens name their own issuer, checked against the provider's.
  const detected = name === "apple" || name === "azure" ? claimedIssuerOr400(params.id_token) : "";
  if (params.issuer && detected && params.issuer !== detected) {
    throw new AuthApiError(400, "validation_failed", "Provided issuer does not match ID token issuer");
  }
  if (name === "apple") {
    const issuers = p.base ? [p.base] : APPLE_ISSUERS;
    if (!issuers.includes(detected)) {
      throw new AuthApiError(
        400,
        "validation_failed",
        "Detected ID token issuer is not an Apple ID token issuer",
      );
    }
    return {
      p,
      issuer: detected,
      anyIssuer: true,
      mapping: ID_TOKEN_MAPPINGS.apple,
      skipNonceCheck: p.skipNonceCheck,
    };
  }
  if (name === "azure") {
    const allowed = p.base
      ? azureIssuerAllowed(p, detected)
      : AZURE_ISSUER_PREFIXES.some((prefix) => detected.startsWith(prefix));
    if (!allowed) {
      throw new AuthApiError(
        400,
        "validation_failed",
        "Detected ID token issuer is not an Azure ID token issuer",
      );
    }
    return {
      p,
      issuer: detected,
      anyIssuer: false,
      mapping: ID_TOKEN_MAPPINGS.azure,
      skipNonceCheck: p.skipNonceCheck,
    };
  }
  return {
    p,
    issuer: spec.idToken!.issuer(p),
    anyIssuer: false,
    mapping: spec.idToken!.mapping,
    // Facebook's Limited Login tokens carry no nonce Strata could check.
    skipNonceCheck: name === "facebook" || p.skipNonceCheck,
  };
}

function claimedIssuerOr400(token: string): string {
  try {
    return claimedIssuer(token);
  } catch (e) {
    throw new AuthApiError(400, "validation_failed", (e as Error).message);
  }
}

/** The audience and nonce checks of a verified token. */
function checkClaims(v: Verifier, claims: JWTPayload, nonce: string | undefined): void {
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!v.p.clientIds.some((id) => aud.includes(id))) {
    throw refused(`Unacceptable audience in id_token: [${aud.join(" ")}]`);
  }
  if (v.skipNonceCheck) return;
  const tokenNonce = typeof claims.nonce === "string" ? claims.nonce : "";
  if (Boolean(tokenNonce) !== Boolean(nonce)) {
    throw refused("Passed nonce and nonce in id_token should either both exist or not.");
  }
  if (nonce && createHash("sha256").update(nonce).digest("hex") !== tokenNonce) {
    throw refused("Nonces mismatch");
  }
}

export async function idTokenGrant(call: AuthCall) {
  const { project, req, settings } = call;
  const params = parse(body, req.body);
  // Linking (auth-js linkIdentity with a token) is for the signed-in user, with manual linking on.
  let linkTarget: UserRow | undefined;
  if (params.link_identity) {
    requireManualLinking(settings);
    linkTarget = (await currentUser(call)).user;
    if (!linkTarget)
      throw new AuthApiError(400, "validation_failed", "Linking requires a valid user authentication");
  }
  const v = await verifierOf(call, params);
  let claims: JWTPayload;
  try {
    claims = await verifyIdToken(params.id_token, v.issuer, {
      anyIssuer: v.anyIssuer,
      accessToken: params.access_token,
    });
  } catch (e) {
    if (e instanceof IdTokenError) throw refused("Bad ID token");
    throw e;
  }
  checkClaims(v, claims, params.nonce);
  const user = v.mapping(claims);
  const identity = { provider: v.p.name, user, data: identityData(user), emailOptional: v.p.emailOptional };
  const result = await withAdminTransaction(project.authPool, async (db) => {
    if (linkTarget) {
      const linked = await linkExternal(db, linkTarget, identity);
      return {
        user: linked,
        created: false,
        refused: undefined,
        session: await startSession(db, linked.id, "oauth"),
      };
    }
    const signedIn = await signInExternal(db, settings, identity);
    if (signedIn.created) await beforeUserCreated(project.authPool, settings, signedIn.user, req.ip);
    // Refused with the user (and identity) kept: committed all the same.
    if (signedIn.refused) return { ...signedIn, session: undefined };
    return { ...signedIn, session: await startSession(db, signedIn.user.id, "oauth") };
  });
  if (result.created) await afterUserCreated(project.authPool, settings, result.user, req.ip);
  if (result.refused || !result.session) throw result.refused;
  return sessionResponse(call, result.user, result.session, "oauth");
}
