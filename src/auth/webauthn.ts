import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type RegistrationResponseJSON,
  type WebAuthnCredential,
} from "@simplewebauthn/server";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";

/**
 * WebAuthn ceremonies (registration and assertion) for the project's relying party, with
 * `@simplewebauthn/server`: for MFA factors and for passkeys. The relying party comes from the project's auth config only (never from what a
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

/** A credential a registration created, before it is stored as an MFA factor's or a passkey. */
export interface NewCredential {
  id: Buffer;
  publicKey: Buffer;
  counter: number;
  transports: string[];
  aaguid: string;
  attestationType: string;
  userVerified: boolean;
  backupEligible: boolean;
  backedUp: boolean;
  attachment: string;
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

const toBase64Url = (b64: string) => Buffer.from(b64, "base64").toString("base64url");
/** A user's WebAuthn user handle, as the platform makes it: the bytes of the user id's text. */
const userHandle = (id: string) => new Uint8Array(Buffer.from(id, "utf8"));

function session(rp: RelyingParty, userId: string, challenge: string, allowed: string[], seconds: number) {
  return {
    challenge,
    rpId: rp.id,
    user_id: Buffer.from(userHandle(userId)).toString("base64"),
    allowed_credentials: allowed,
    userVerification: "preferred",
    expires: new Date(Date.now() + seconds * 1000).toISOString(),
  } satisfies CeremonySession;
}

/**
 * The options of a new credential for `user` (none of `exclude` again, by id in base64url), and the session
 * to keep; a passkey must be discoverable (a resident key), an MFA factor's need not.
 */
export async function registrationCeremony(
  rp: RelyingParty,
  user: { id: string; name: string; displayName: string },
  exclude: { id: string; transports?: string[] }[],
  seconds: number,
  residentKey: "discouraged" | "required" = "discouraged",
) {
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userID: userHandle(user.id),
    userName: user.name,
    userDisplayName: user.displayName,
    timeout: seconds * 1000,
    attestationType: "none",
    excludeCredentials: exclude,
    authenticatorSelection: {
      residentKey,
      requireResidentKey: residentKey === "required",
      userVerification: "preferred",
    },
  });
  return { options, session: session(rp, user.id, options.challenge, [], seconds) };
}

/**
 * The options of an assertion by one of `allow` (by id in base64url), and the session to keep; with no
 * user, a discoverable one (a passkey sign-in: the authenticator names the user).
 */
export async function assertionCeremony(
  rp: RelyingParty,
  userId: string | null,
  allow: { id: string; transports?: string[] }[],
  seconds: number,
) {
  const options = await generateAuthenticationOptions({
    rpID: rp.id,
    timeout: seconds * 1000,
    userVerification: "preferred",
    allowCredentials: allow,
  });
  const kept = session(
    rp,
    userId ?? "",
    options.challenge,
    allow.map((c) => c.id),
    seconds,
  );
  return { options, session: userId ? kept : { ...kept, user_id: "" } };
}

/**
 * The credential a registration response creates, checked against the session's challenge, the RP id and
 * origins (attestation `none` or self/packed as the library verifies them); undefined when it does not verify.
 */
export async function verifyRegistration(
  rp: RelyingParty,
  kept: CeremonySession,
  response: unknown,
): Promise<NewCredential | undefined> {
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
    id: Buffer.from(info.credential.id, "base64url"),
    publicKey: Buffer.from(info.credential.publicKey),
    counter: info.credential.counter,
    transports: info.credential.transports ?? [],
    aaguid: info.aaguid,
    attestationType: info.fmt,
    userVerified: info.userVerified,
    backupEligible: info.credentialDeviceType === "multiDevice",
    backedUp: info.credentialBackedUp,
    attachment: String((response as { authenticatorAttachment?: string }).authenticatorAttachment ?? ""),
  };
}

/** A new credential as an MFA factor keeps it (go-webauthn's shape). */
export function toStoredCredential(c: NewCredential): StoredCredential {
  return {
    id: c.id.toString("base64"),
    publicKey: c.publicKey.toString("base64"),
    attestationType: c.attestationType,
    transport: c.transports,
    flags: {
      userPresent: true,
      userVerified: c.userVerified,
      backupEligible: c.backupEligible,
      backupState: c.backedUp,
    },
    authenticator: {
      AAGUID: Buffer.from(c.aaguid.replace(/-/g, ""), "hex").toString("base64"),
      signCount: c.counter,
      cloneWarning: false,
      attachment: c.attachment,
    },
  };
}

/** An MFA factor's stored credential as the library checks an assertion against it. */
export function factorCredential(c: StoredCredential): WebAuthnCredential {
  return {
    id: toBase64Url(c.id),
    publicKey: new Uint8Array(Buffer.from(c.publicKey, "base64")),
    counter: c.authenticator.signCount,
    transports: c.transport,
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
  credential: WebAuthnCredential,
  response: unknown,
): Promise<number | undefined> {
  const assertion = response as AuthenticationResponseJSON;
  if (typeof assertion?.rawId !== "string" || assertion.rawId !== credential.id) return undefined;
  const result = await verifyAuthenticationResponse({
    response: assertion,
    expectedChallenge: kept.challenge,
    expectedOrigin: rp.origins,
    expectedRPID: rp.id,
    credential,
    requireUserVerification: false,
  }).catch(() => undefined);
  if (!result?.verified) return undefined;
  return result.authenticationInfo.newCounter;
}

/** The user a discoverable assertion names (its user handle), or undefined. */
export function assertedUserId(response: unknown): string | undefined {
  const handle = (response as AuthenticationResponseJSON | undefined)?.response?.userHandle;
  return typeof handle === "string" ? Buffer.from(handle, "base64url").toString("utf8") : undefined;
}

/** The credential id an assertion names (its rawId, base64url), or undefined. */
export function assertedCredentialId(response: unknown): string | undefined {
  const rawId = (response as AuthenticationResponseJSON | undefined)?.rawId;
  return typeof rawId === "string" ? rawId : undefined;
}
