import { randomInt } from "node:crypto";
import * as OTPAuth from "otpauth";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { smsSenderOf, type SessionCall } from "../call";
import { AuthApiError, factorNotFound } from "../errors";
import { checkVerificationAttempt } from "../hook";
import { parse, rowById } from "../input";
import { tokenHash } from "../otp";
import { sessionResponse } from "../signIn";
import {
  channelOf,
  checkFrequency,
  deliverSms,
  otpLength,
  providerVerifies,
  validatePhone,
  verifyWithProvider,
} from "../sms";
import {
  challengeOf,
  claimSignCount,
  claimTotpStep,
  deleteChallenge,
  deleteFactors,
  factorOfUser,
  factorsOf,
  insertChallenge,
  insertFactor,
  markFactorVerified,
  recordLastCeremony,
  saveWebAuthnCredential,
  spendChallenge,
  type FactorRow,
} from "../store/factors";
import { addRefreshToken, elevateSession } from "../store/sessions";
import { userById } from "../store/users";
import {
  assertionCeremony,
  factorCredential,
  registrationCeremony,
  relyingPartyOf,
  toStoredCredential,
  verifyAssertion,
  verifyRegistration,
  type StoredCredential,
} from "../webauthn";

/**
 * /factors: MFA with TOTP, phone and WebAuthn factors (auth-js `mfa.*` and `mfa.webauthn.*`): enroll,
 * challenge, verify, unenroll.
 */

/** A challenge is answered within 5 minutes; TOTP codes of the step before and after are accepted. */
const CHALLENGE_SECONDS = 300;
const TOTP_WINDOW = 1;

const enrollBody = z.object({
  factor_type: z.string(),
  friendly_name: z.string().max(255).optional(),
  issuer: z.string().optional(),
  phone: z.string().optional(),
});
const challengeBody = z.object({ channel: z.string().nullish() });
const verifyBody = z.object({ challenge_id: z.string().uuid(), code: z.string().min(1) });
const webAuthnVerifyBody = z.object({
  challenge_id: z.string().uuid(),
  webauthn: z.object({
    type: z.enum(["create", "request"]),
    credential_response: z.record(z.string(), z.unknown()),
  }),
});

const randomDigits = (length: number) => Array.from({ length }, () => String(randomInt(10))).join("");
const ipOf = (ip: string | undefined) => (ip && /^[0-9a-f.:]+$/i.test(ip) ? ip : null);

/** The caller's factor named in the path (`:id`). */
async function factorOf({ project, req, caller }: SessionCall): Promise<FactorRow> {
  return rowById(req.params.id, (id) => factorOfUser(project.authPool, caller.user.id, id), factorNotFound);
}

async function checkFactorLimits({ project, settings, caller }: SessionCall) {
  const factors = await factorsOf(project.authPool, caller.user.id);
  if (factors.some((f) => f.status === "verified") && caller.aal !== "aal2") {
    throw new AuthApiError(422, "insufficient_aal", "AAL2 required to enroll a new factor");
  }
  if (factors.length >= Number(settings.mfa_max_enrolled_factors ?? 10)) {
    throw new AuthApiError(
      422,
      "too_many_enrolled_mfa_factors",
      "Maximum number of verified factors reached, unenroll to continue",
    );
  }
}

/** The caller's new unverified factor; its friendly name (if any) is not one the user gave another. */
async function insertNamedFactor(
  { project, caller }: SessionCall,
  friendlyName: string,
  factor: { type: "totp"; secret: string } | { type: "phone"; phone: string } | { type: "webauthn" },
) {
  return insertFactor(project.authPool, { userId: caller.user.id, friendlyName, ...factor }).catch(
    (e: { code?: string }) => {
      if (e.code !== "23505") throw e;
      throw new AuthApiError(
        422,
        "mfa_factor_name_conflict",
        `A factor with the friendly name "${friendlyName}" for this user already exists`,
      );
    },
  );
}

/** POST /factors: a new unverified factor (TOTP: its secret and QR code; phone: its number). */
export async function enroll(call: SessionCall) {
  const { req, settings, caller } = call;
  const body = parse(enrollBody, req.body);
  if (body.factor_type === "phone") return enrollPhone(call, body);
  if (body.factor_type === "webauthn") return enrollWebAuthn(call, body);
  if (body.factor_type !== "totp") {
    throw new AuthApiError(
      422,
      "mfa_factor_type_not_supported",
      `Factor type ${body.factor_type} is not supported`,
    );
  }
  if (settings.mfa_totp_enroll_enabled === false) {
    throw new AuthApiError(422, "mfa_totp_enroll_not_enabled", "MFA enroll is disabled for TOTP");
  }
  await checkFactorLimits(call);
  const friendlyName = body.friendly_name ?? "";
  const secret = new OTPAuth.Secret({ size: 20 }).base32;
  let issuer = body.issuer;
  if (!issuer) {
    try {
      issuer = new URL(String(settings.site_url)).hostname;
    } catch {
      issuer = "Strata";
    }
  }
  const uri = new OTPAuth.TOTP({ issuer, label: caller.user.email || caller.user.id, secret }).toString();
  const factor = await insertNamedFactor(call, friendlyName, { type: "totp", secret });
  // Loaded with the first enrolment: a server that enrols no TOTP factor never holds the library.
  const { default: QRCode } = await import("qrcode");
  const svg = await QRCode.toString(uri, { type: "svg" });
  return {
    id: factor.id,
    type: "totp",
    friendly_name: friendlyName,
    totp: { qr_code: `data:image/svg+xml;utf-8,${svg}`, secret, uri },
  };
}

/** A phone factor (mfa_phone_enroll_enabled): unverified until a code sent to the number is verified. */
async function enrollPhone(call: SessionCall, body: z.infer<typeof enrollBody>) {
  const { project, settings, caller } = call;
  if (settings.mfa_phone_enroll_enabled !== true) {
    throw new AuthApiError(422, "mfa_phone_enroll_not_enabled", "MFA enroll is disabled for Phone");
  }
  if (!body.phone) {
    throw new AuthApiError(400, "validation_failed", "Phone number required to enroll Phone factor");
  }
  const phone = validatePhone(body.phone);
  const same = (await factorsOf(project.authPool, caller.user.id)).filter(
    (f) => f.factor_type === "phone" && f.phone === phone,
  );
  if (same.some((f) => f.status === "verified")) {
    throw new AuthApiError(
      422,
      "mfa_verified_factor_exists",
      "A verified phone factor already exists, unenroll the existing factor to continue",
    );
  }
  // An unverified factor of the same number is replaced.
  await deleteFactors(
    project.authPool,
    same.map((f) => f.id),
  );
  await checkFactorLimits(call);
  const friendlyName = body.friendly_name ?? "";
  const factor = await insertNamedFactor(call, friendlyName, { type: "phone", phone });
  return { id: factor.id, type: "phone", friendly_name: friendlyName, phone: body.phone };
}

/**
 * A WebAuthn factor (mfa_web_authn_enroll_enabled): unverified until a credential is registered through
 * its first challenge.
 */
async function enrollWebAuthn(call: SessionCall, body: z.infer<typeof enrollBody>) {
  if (call.settings.mfa_web_authn_enroll_enabled !== true) {
    throw new AuthApiError(422, "mfa_webauthn_enroll_not_enabled", "MFA enroll is disabled for WebAuthn");
  }
  await checkFactorLimits(call);
  const friendlyName = body.friendly_name ?? "";
  const factor = await insertNamedFactor(call, friendlyName, { type: "webauthn" });
  return { id: factor.id, type: "webauthn", friendly_name: friendlyName };
}

const webAuthnVerifyDisabled = () =>
  new AuthApiError(422, "mfa_webauthn_verify_not_enabled", "MFA verification is disabled for WebAuthn");

/** POST /factors/:id/challenge: a challenge to verify the factor against (a phone factor's code is sent). */
export async function challenge(call: SessionCall) {
  const { project, req, settings } = call;
  const factor = await factorOf(call);
  if (factor.factor_type === "phone") return challengePhone(call, factor);
  if (factor.factor_type === "webauthn") return challengeWebAuthn(call, factor);
  if (settings.mfa_totp_verify_enabled === false) {
    throw new AuthApiError(422, "mfa_totp_verify_not_enabled", "MFA verification is disabled for TOTP");
  }
  const created = await insertChallenge(project.authPool, {
    factorId: factor.id,
    ip: ipOf(req.ip),
    otpHash: null,
    seconds: CHALLENGE_SECONDS,
  });
  return { id: created.id, type: "totp", expires_at: created.expiresAt };
}

/**
 * A phone factor's challenge (mfa_phone_verify_enabled): a code of mfa_phone_otp_length sent with
 * mfa_phone_template through the send-SMS hook or the provider, at most every mfa_phone_max_frequency
 * seconds; only its hash is kept with the challenge.
 */
async function challengePhone(call: SessionCall, factor: FactorRow) {
  const { project, req, settings, caller } = call;
  if (settings.mfa_phone_verify_enabled !== true) {
    throw new AuthApiError(422, "mfa_phone_verify_not_enabled", "MFA verification is disabled for Phone");
  }
  const channel = channelOf(settings, parse(challengeBody, req.body).channel);
  checkFrequency(factor.last_challenged_at, Number(settings.mfa_phone_max_frequency ?? 60));
  const phone = factor.phone ?? "";
  const otp = randomDigits(otpLength(settings.mfa_phone_otp_length));
  const created = await withAdminTransaction(project.authPool, async (db) => {
    const inserted = await insertChallenge(db, {
      factorId: factor.id,
      ip: ipOf(req.ip),
      otpHash: tokenHash(phone, otp),
      seconds: CHALLENGE_SECONDS,
    });
    await deliverSms(db, smsSenderOf(call), caller.user, {
      phone,
      otp,
      channel,
      template: settings.mfa_phone_template,
      type: "mfa",
      what: "mfa",
    });
    return inserted;
  });
  return { id: created.id, type: "phone", expires_at: created.expiresAt };
}

/**
 * A WebAuthn factor's challenge (mfa_web_authn_verify_enabled): the options of a new credential while the
 * factor has none (`create`; the user's other credentials excluded), else of an assertion by its credential
 * (`request`). The relying party is the project's (webauthn_rp_id / webauthn_rp_origins), whatever
 * rpId the client sends along.
 */
async function challengeWebAuthn(call: SessionCall, factor: FactorRow) {
  const { project, req, settings, caller } = call;
  if (settings.mfa_web_authn_verify_enabled !== true) throw webAuthnVerifyDisabled();
  const rp = relyingPartyOf(settings);
  const credential = factor.web_authn_credential;
  const name = caller.user.email || caller.user.phone || caller.user.id;
  const metaName = caller.user.raw_user_meta_data?.name;
  const described = (c: StoredCredential) => ({ id: factorCredential(c).id, transports: c.transport });
  const ceremony = credential
    ? await assertionCeremony(rp, caller.user.id, [described(credential)], CHALLENGE_SECONDS)
    : await registrationCeremony(
        rp,
        { id: caller.user.id, name, displayName: typeof metaName === "string" && metaName ? metaName : name },
        (await factorsOf(project.authPool, caller.user.id)).flatMap((f) =>
          f.web_authn_credential ? [described(f.web_authn_credential)] : [],
        ),
        CHALLENGE_SECONDS,
      );
  const created = await insertChallenge(project.authPool, {
    factorId: factor.id,
    ip: ipOf(req.ip),
    otpHash: null,
    seconds: CHALLENGE_SECONDS,
    webAuthn: ceremony.session,
  });
  return {
    id: created.id,
    type: "webauthn",
    expires_at: created.expiresAt,
    webauthn: {
      type: credential ? "request" : "create",
      credential_options: { publicKey: ceremony.options },
    },
  };
}

/** The factor's challenge named in a verify request, while it is unused and unexpired. */
async function liveChallenge({ project }: SessionCall, factor: FactorRow, challengeId: string) {
  const found = await challengeOf(project.authPool, challengeId, factor.id);
  if (!found) throw new AuthApiError(404, "mfa_challenge_not_found", "Challenge not found");
  if (found.verified_at || Number(found.age) > CHALLENGE_SECONDS) {
    await deleteChallenge(project.authPool, found.id);
    throw new AuthApiError(
      422,
      "mfa_challenge_expired",
      `MFA challenge ${found.id} has expired, verify against another challenge or create a new challenge.`,
    );
  }
  return found;
}

/** The mfa_verification_attempt hook's verdict on a verification (it may refuse it). */
function verificationAttempt(call: SessionCall, factor: FactorRow, valid: boolean) {
  return checkVerificationAttempt(
    call.project.authPool,
    call.settings,
    "mfa_verification_attempt",
    { user_id: call.caller.user.id, factor_id: factor.id, factor_type: factor.factor_type, valid },
    call.req.ip,
  );
}

/**
 * A WebAuthn factor's verification: the credential registered (`create`) or the assertion by the factor's
 * credential (`request`) checked against the challenge, RP id and origins. The challenge is spent at once
 * (a replayed response finds it used) and the signature counter must grow (a cloned authenticator's or
 * replayed assertion's does not).
 */
async function verifyWebAuthn(call: SessionCall, factor: FactorRow) {
  const { project, req, settings, caller } = call;
  if (settings.mfa_web_authn_verify_enabled !== true) throw webAuthnVerifyDisabled();
  const body = parse(webAuthnVerifyBody, req.body);
  const found = await liveChallenge(call, factor, body.challenge_id);
  const kept = found.web_authn_session_data;
  if (!kept) throw new AuthApiError(404, "mfa_challenge_not_found", "Challenge not found");
  if (found.ip !== ipOf(req.ip)) {
    throw new AuthApiError(422, "mfa_ip_address_mismatch", "Challenge and verify IP addresses mismatch");
  }
  const rp = relyingPartyOf(settings);
  const stored = factor.web_authn_credential;
  const response = body.webauthn.credential_response;
  const expected = stored ? "request" : "create";
  const outcome =
    body.webauthn.type !== expected
      ? undefined
      : stored
        ? await verifyAssertion(rp, kept, factorCredential(stored), response)
        : await verifyRegistration(rp, kept, response);
  await verificationAttempt(call, factor, outcome !== undefined);
  const failed = () =>
    new AuthApiError(400, "webauthn_verification_failed", "Credential verification failed");
  if (outcome === undefined || !(await spendChallenge(project.authPool, found.id))) throw failed();
  if (typeof outcome === "number") {
    if (!(await claimSignCount(project.authPool, factor.id, outcome))) throw failed();
  } else {
    await saveWebAuthnCredential(
      project.authPool,
      { id: factor.id, userId: caller.user.id },
      toStoredCredential(outcome),
      outcome.aaguid,
    );
  }
  await recordLastCeremony(project.authPool, factor.id, {
    challenge: { id: found.id },
    type: expected,
    credential_response: response,
  });
  return verified(call, factor.id, "mfa/webauthn");
}

/** POST /factors/:id/verify: a challenge's code checked once; the factor is verified and the session aal2. */
export async function verify(call: SessionCall) {
  const { ctx, project, req, settings } = call;
  const factor = await factorOf(call);
  if (factor.factor_type === "webauthn") return verifyWebAuthn(call, factor);
  const isPhone = factor.factor_type === "phone";
  if (isPhone && settings.mfa_phone_verify_enabled !== true) {
    throw new AuthApiError(422, "mfa_phone_verify_not_enabled", "MFA verification is disabled for Phone");
  }
  if (!isPhone && settings.mfa_totp_verify_enabled === false) {
    throw new AuthApiError(422, "mfa_totp_verify_not_enabled", "MFA verification is disabled for TOTP");
  }
  const body = parse(verifyBody, req.body);
  const found = await liveChallenge(call, factor, body.challenge_id);
  if (isPhone) {
    if (found.ip !== ipOf(req.ip)) {
      throw new AuthApiError(422, "mfa_ip_address_mismatch", "Challenge and verify IP addresses mismatch");
    }
    const code = body.code.trim();
    let valid: boolean;
    if (providerVerifies(settings)) {
      await verifyWithProvider(settings, ctx.config.smsProviderUrls, factor.phone ?? "", code);
      valid = true;
    } else {
      valid = found.otp_code === tokenHash(factor.phone ?? "", code);
    }
    await verificationAttempt(call, factor, valid);
    // The challenge is spent at once: a code verifies one session once.
    if (!valid || !(await spendChallenge(project.authPool, found.id))) {
      throw new AuthApiError(422, "mfa_verification_failed", "Invalid MFA Phone code entered");
    }
    return verified(call, factor.id, "mfa/phone");
  }
  const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(factor.secret) });
  const now = Date.now();
  const delta = totp.validate({ token: body.code.trim(), timestamp: now, window: TOTP_WINDOW });
  await verificationAttempt(call, factor, delta !== null);
  // Each time step's code verifies once: the step is claimed atomically, so a replayed code (or a
  // concurrent second use) is refused like a wrong one.
  if (
    delta === null ||
    !(await claimTotpStep(project.authPool, factor.id, totp.counter({ timestamp: now }) + delta))
  ) {
    throw new AuthApiError(422, "mfa_verification_failed", "Invalid TOTP code entered");
  }
  await spendChallenge(project.authPool, found.id);
  return verified(call, factor.id, "totp");
}

/** A verified factor: the factor is verified, the session raised to aal2 and answered as a fresh pair. */
async function verified(call: SessionCall, factorId: string, method: string) {
  const { project, caller } = call;
  await markFactorVerified(project.authPool, factorId);
  await elevateSession(project.authPool, caller.sessionId, factorId, method);
  const refreshToken = await addRefreshToken(project.authPool, caller.sessionId, caller.user.id, null);
  const user = (await userById(project.authPool, caller.user.id))!;
  return sessionResponse(call, user, { sessionId: caller.sessionId, refreshToken }, method);
}

/** DELETE /factors/:id: a factor removed (a verified one only from an aal2 session). */
export async function unenroll(call: SessionCall) {
  const { project, caller } = call;
  const factor = await factorOf(call);
  const anyVerified = (await factorsOf(project.authPool, caller.user.id)).some(
    (f) => f.status === "verified",
  );
  if (anyVerified && caller.aal !== "aal2") {
    throw new AuthApiError(422, "insufficient_aal", "AAL2 required to unenroll verified factor");
  }
  await deleteFactors(project.authPool, [factor.id]);
  return { id: factor.id };
}
