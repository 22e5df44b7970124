import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import type { AuthCall, SessionCall } from "../call";
import { AuthApiError, passkeyNotFound } from "../errors";
import { parse, rowById } from "../input";
import { sessionResponse } from "../signIn";
import { factorsOf } from "../store/factors";
import {
  claimPasskeyUse,
  consumePasskeyChallenge,
  deletePasskey,
  insertPasskey,
  insertPasskeyChallenge,
  passkeyByCredentialId,
  passkeyOfUser,
  passkeysOf,
  renamePasskey,
  toPasskey,
  type PasskeyChallengeType,
} from "../store/passkeys";
import { startSession } from "../store/sessions";
import { userById } from "../store/users";
import {
  assertedCredentialId,
  assertedUserId,
  assertionCeremony,
  registrationCeremony,
  relyingPartyOf,
  verifyAssertion,
  verifyRegistration,
} from "../webauthn";

/**
 * /passkeys (passkey_enabled; auth-js `registerPasskey`, `signInWithPasskey`, `passkey.*`): a signed-in user
 * registers discoverable WebAuthn credentials, lists, renames and deletes them; anyone signs in with one
 * (the authenticator names the user). A ceremony's challenge is taken once, as it is verified; a passkey's
 * signature counter must grow. The relying party is the project's (webauthn_rp_id, webauthn_rp_origins).
 */

const CHALLENGE_SECONDS = 300;
const MAX_PASSKEYS_PER_USER = 10;
/** The platform's name of a passkey whose authenticator it does not know. */
const DEFAULT_NAME = "Passkey";

const verifyBody = z.object({
  challenge_id: z.string().uuid(),
  credential: z.record(z.string(), z.unknown()),
});
const renameBody = z.object({ friendly_name: z.string().min(1).max(120) });

const verificationFailed = () =>
  new AuthApiError(400, "webauthn_verification_failed", "Credential verification failed");

function requirePasskeys(call: AuthCall) {
  if (call.settings.passkey_enabled !== true) {
    throw new AuthApiError(404, "passkey_disabled", "Passkeys are disabled");
  }
}

/** Registering or deleting a passkey: not an anonymous user's, and from an aal2 session once MFA is on. */
async function requireManagement(call: SessionCall) {
  requirePasskeys(call);
  const { project, caller } = call;
  if (caller.user.is_anonymous) {
    throw new AuthApiError(403, "no_authorization", "Anonymous user not allowed to perform these actions");
  }
  const mfa = (await factorsOf(project.authPool, caller.user.id)).some((f) => f.status === "verified");
  if (mfa && caller.aal !== "aal2") {
    throw new AuthApiError(
      403,
      "insufficient_aal",
      "AAL2 session is required to manage passkeys when MFA is enabled",
    );
  }
}

/** Registering a passkey: as managing one, and not for an SSO user (who signs in only through SSO). */
async function requireRegistration(call: SessionCall) {
  if (call.caller.user.is_sso_user) {
    throw new AuthApiError(422, "validation_failed", "SSO users cannot register passkeys");
  }
  await requireManagement(call);
}

/** The challenge a verify request names, taken (it verifies one response once). */
async function takeChallenge(call: AuthCall, id: string, type: PasskeyChallengeType, userId: string | null) {
  const taken = await consumePasskeyChallenge(call.project.authPool, id, type, userId);
  if (!taken) {
    throw new AuthApiError(400, "webauthn_challenge_not_found", "Challenge not found or already used");
  }
  if (taken.expired) throw new AuthApiError(400, "webauthn_challenge_expired", "Challenge has expired");
  return taken.session;
}

const tooMany = () => new AuthApiError(422, "too_many_passkeys", "Maximum number of passkeys reached");

/** POST /passkeys/registration/options: the options of a new discoverable credential of the caller. */
export async function registrationOptions(call: SessionCall) {
  await requireRegistration(call);
  const { project, settings, caller } = call;
  const existing = await passkeysOf(project.authPool, caller.user.id);
  if (existing.length >= MAX_PASSKEYS_PER_USER) throw tooMany();
  const name = caller.user.email || caller.user.phone || caller.user.id;
  const metaName = caller.user.raw_user_meta_data?.name;
  const { options, session } = await registrationCeremony(
    relyingPartyOf(settings),
    { id: caller.user.id, name, displayName: typeof metaName === "string" && metaName ? metaName : name },
    existing.map((p) => ({ id: p.credential_id.toString("base64url") })),
    CHALLENGE_SECONDS,
    "required",
  );
  const challenge = await insertPasskeyChallenge(project.authPool, {
    userId: caller.user.id,
    type: "registration",
    session,
    seconds: CHALLENGE_SECONDS,
  });
  return { challenge_id: challenge.id, options, expires_at: challenge.expiresAt };
}

/** POST /passkeys/registration/verify: the new credential checked and kept as the caller's passkey. */
export async function registrationVerify(call: SessionCall) {
  await requireRegistration(call);
  const { project, req, settings, caller } = call;
  const body = parse(verifyBody, req.body);
  const kept = await takeChallenge(call, body.challenge_id, "registration", caller.user.id);
  const created = await verifyRegistration(relyingPartyOf(settings), kept, body.credential);
  if (!created) throw verificationFailed();
  const passkey = await withAdminTransaction(project.authPool, (db) =>
    insertPasskey(db, caller.user.id, created, DEFAULT_NAME, MAX_PASSKEYS_PER_USER),
  ).catch((e: { code?: string }) => {
    if (e.code !== "23505") throw e;
    throw new AuthApiError(422, "webauthn_credential_exists", "This credential is already registered");
  });
  if (!passkey) throw tooMany();
  return { id: passkey.id, friendly_name: passkey.friendly_name, created_at: passkey.created_at };
}

/** POST /passkeys/authentication/options: the options of a discoverable assertion (no user named yet). */
export async function authenticationOptions(call: AuthCall) {
  requirePasskeys(call);
  const { options, session } = await assertionCeremony(
    relyingPartyOf(call.settings),
    null,
    [],
    CHALLENGE_SECONDS,
  );
  const challenge = await insertPasskeyChallenge(call.project.authPool, {
    userId: null,
    type: "authentication",
    session,
    seconds: CHALLENGE_SECONDS,
  });
  return { challenge_id: challenge.id, options, expires_at: challenge.expiresAt };
}

/**
 * POST /passkeys/authentication/verify: the assertion of a passkey of the user its authenticator names,
 * checked against the challenge; a new aal1 session signed in with `passkey`.
 */
export async function authenticationVerify(call: AuthCall) {
  requirePasskeys(call);
  const { project, req, settings } = call;
  const body = parse(verifyBody, req.body);
  const kept = await takeChallenge(call, body.challenge_id, "authentication", null);
  const credentialId = assertedCredentialId(body.credential);
  const passkey = credentialId
    ? await passkeyByCredentialId(project.authPool, Buffer.from(credentialId, "base64url"))
    : undefined;
  // The credential must be the passkey of the very user the authenticator names.
  if (!passkey || !credentialId || passkey.user_id !== assertedUserId(body.credential)) {
    throw verificationFailed();
  }
  const count = await verifyAssertion(
    relyingPartyOf(settings),
    kept,
    {
      id: credentialId,
      publicKey: new Uint8Array(passkey.public_key),
      counter: Number(passkey.sign_count),
      transports: passkey.transports,
    },
    body.credential,
  );
  const user = await userById(project.authPool, passkey.user_id);
  if (count === undefined || !user) throw verificationFailed();
  if (user.email && !user.email_confirmed_at) {
    throw new AuthApiError(403, "email_not_confirmed", "Email not confirmed");
  }
  if (user.phone && !user.phone_confirmed_at) {
    throw new AuthApiError(403, "phone_not_confirmed", "Phone not confirmed");
  }
  if (user.banned_until && user.banned_until.getTime() > Date.now()) {
    throw new AuthApiError(403, "user_banned", "User is banned");
  }
  if (!(await claimPasskeyUse(project.authPool, passkey.id, count))) throw verificationFailed();
  const session = await startSession(project.authPool, user.id, "passkey");
  return sessionResponse(call, user, session, "passkey");
}

/** The caller's passkey named in the path (`:id`). */
async function passkeyOf({ project, req, caller }: SessionCall) {
  return rowById(req.params.id, (id) => passkeyOfUser(project.authPool, caller.user.id, id), passkeyNotFound);
}

/** GET /passkeys: the caller's passkeys. */
export async function list(call: SessionCall) {
  requirePasskeys(call);
  return (await passkeysOf(call.project.authPool, call.caller.user.id)).map(toPasskey);
}

/** PATCH /passkeys/:id: a passkey renamed. */
export async function rename(call: SessionCall) {
  requirePasskeys(call);
  const passkey = await passkeyOf(call);
  const body = parse(renameBody, call.req.body);
  return toPasskey(await renamePasskey(call.project.authPool, passkey.id, body.friendly_name));
}

/** DELETE /passkeys/:id: a passkey removed (204). */
export async function remove(call: SessionCall) {
  await requireManagement(call);
  const passkey = await passkeyOf(call);
  await deletePasskey(call.project.authPool, passkey.id);
  call.res.status(204).end();
}
