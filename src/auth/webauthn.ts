import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type RegistrationResponseJSON,
} from "@simplewebauthn/server";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";

/**
 * WebAuthn ceremonies (registration and assertion) for the project's relying party, with
 * `@simplewebauthn/server`. The relying party comes from the project's auth config only (never from what a
 * client claims): `webauthn_rp_id` (default: site_url's host), `webauthn_rp_origins` (comma-separated;
 * default: site_url's origin) and `webauthn_rp_display_name` (default: the RP id).
 */

export interface RelyingParty {
  id: string;
  name: string;
  origins: string[];
}

/**
 * A credential as the platform's auth server stores it (go-webauthn's `Credential` as JSON: byte strings in
 * standard base64).
 */
export interface StoredCredential {
  id: string;
  publicKey: string;
  attestationType: string;
  transport: string[];
  flags: { userPresent: boolean; userVerified: boolean; backupEligible: boolean; backupState: boolean };
  authenticator: { AAGUID: string; signCount: number; cloneWarning: boolean; attachment: string };
}

/** What a challenge keeps of its ceremony: the random challenge and the credentials it allows. */
export interface CeremonySession {
  challenge: string;
  rpId: string;
  user_id: string;
  allowed_credentials: string[];
  userVerification: string;
  expires: string;
}

export function relyingPartyOf(settings: AuthSettings): RelyingParty {
  let site: URL | undefined;
  try {
    site = new URL(String(settings.site_url));
  } catch {
    site = undefined;
  }
  const id = String(settings.webauthn_rp_id ?? "").trim() || site?.hostname || "";
  const configured = String(settings.webauthn_rp_origins ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter(Boolean);
  const origins = configured.length ? configured : site ? [site.origin] : [];
  if (!id || !origins.length) {
    throw new AuthApiError(
      500,
      "unexpected_failure",
      "WebAuthn needs webauthn_rp_id and webauthn_rp_origins (or a valid site_url)",
    );
  }
  return { id, name: String(settings.webauthn_rp_display_name ?? "").trim() || id, origins };
}

const toBase64 = (b64url: string) => Buffer.from(b64url, "base64url").toString("base64");
const toBase64Url = (b64: string) => Buffer.from(b64, "base64").toString("base64url");
const uuidBytes = (id: string) => new Uint8Array(Buffer.from(id.replace(/-/g, ""), "hex"));

function session(rp: RelyingParty, userId: string, challenge: string, allowed: string[], seconds: number) {
  return {
    challenge,
    rpId: rp.id,
    user_id: Buffer.from(uuidBytes(userId)).toString("base64"),
    allowed_credentials: allowed,
    userVerification: "preferred",
    expires: new Date(Date.now() + seconds * 1000).toISOString(),
  } satisfies CeremonySession;
}

/** The options of a new credential for `user` (none of `exclude` again), and the session to keep. */
export async function registrationCeremony(
  rp: RelyingParty,
  user: { id: string; name: string; displayName: string },
  exclude: StoredCredential[],
  seconds: number,
) {
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userID: uuidBytes(user.id),
    userName: user.name,
    userDisplayName: user.displayName,
    timeout: seconds * 1000,
    attestationType: "none",
    excludeCredentials: exclude.map((c) => ({ id: toBase64Url(c.id), transports: c.transport })),
    authenticatorSelection: { residentKey: "discouraged", userVerification: "preferred" },
  });
  return { options, session: session(rp, user.id, options.challenge, [], seconds) };
}

/** The options of an assertion by one of `allow`, and the session to keep. */
export async function assertionCeremony(
  rp: RelyingParty,
  userId: string,
  allow: StoredCredential[],
  seconds: number,
) {
  const options = await generateAuthenticationOptions({
    rpID: rp.id,
    timeout: seconds * 1000,
    userVerification: "preferred",
    allowCredentials: allow.map((c) => ({ id: toBase64Url(c.id), transports: c.transport })),
  });
  return {
    options,
    session: session(
      rp,
      userId,
      options.challenge,
      allow.map((c) => c.id),
      seconds,
    ),
  };
}

/**
 * The credential a registration response creates, checked against the session's challenge, the RP id and
 * origins (attestation `none` or self/packed as the library verifies them); undefined when it does not verify.
 */
export async function verifyRegistration(
  rp: RelyingParty,
  kept: CeremonySession,
  response: unknown,
): Promise<StoredCredential | undefined> {
  const result = await verifyRegistrationResponse({
    response: response as RegistrationResponseJSON,
    expectedChallenge: kept.challenge,
    expectedOrigin: rp.origins,
    expectedRPID: rp.id,
    requireUserVerification: false,
  }).catch(() => undefined);
  if (!result?.verified) return undefined;
  const info = result.registrationInfo;
  return {
    id: toBase64(info.credential.id),
    publicKey: Buffer.from(info.credential.publicKey).toString("base64"),
    attestationType: info.fmt,
    transport: info.credential.transports ?? [],
    flags: {
      userPresent: true,
      userVerified: info.userVerified,
      backupEligible: info.credentialDeviceType === "multiDevice",
      backupState: info.credentialBackedUp,
    },
    authenticator: {
      AAGUID: Buffer.from(info.aaguid.replace(/-/g, ""), "hex").toString("base64"),
      signCount: info.credential.counter,
      cloneWarning: false,
      attachment: String((response as { authenticatorAttachment?: string }).authenticatorAttachment ?? ""),
    },
  };
}

/**
 * The new signature counter of an assertion by `credential` (one the session allowed) over the session's
 * challenge; undefined when it does not verify (a counter that does not grow, as a cloned authenticator's or
 * a replay's, does not).
 */
export async function verifyAssertion(
  rp: RelyingParty,
  kept: CeremonySession,
  credential: StoredCredential,
  response: unknown,
): Promise<number | undefined> {
  const assertion = response as AuthenticationResponseJSON;
  if (typeof assertion?.rawId !== "string" || toBase64(assertion.rawId) !== credential.id) {
    return undefined;
  }
  const result = await verifyAuthenticationResponse({
    response: assertion,
    expectedChallenge: kept.challenge,
    expectedOrigin: rp.origins,
    expectedRPID: rp.id,
    credential: {
      id: toBase64Url(credential.id),
      publicKey: new Uint8Array(Buffer.from(credential.publicKey, "base64")),
      counter: credential.authenticator.signCount,
      transports: credential.transport,
    },
    requireUserVerification: false,
  }).catch(() => undefined);
  if (!result?.verified) return undefined;
  return result.authenticationInfo.newCounter;
}

/** The AAGUID of a stored credential as a UUID (null when the authenticator gives none). */
export function aaguidOf(credential: StoredCredential): string | null {
  const hex = Buffer.from(credential.authenticator.AAGUID, "base64").toString("hex");
  if (hex.length !== 32) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
