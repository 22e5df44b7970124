import { randomInt } from "node:crypto";
import * as OTPAuth from "otpauth";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { smsSenderOf, type SessionCall } from "../call";
import { AuthApiError } from "../errors";
import { checkVerificationAttempt } from "../hook";
import { parse, uuid } from "../input";
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
  claimTotpStep,
  deleteChallenge,
  deleteFactors,
  factorOfUser,
  factorsOf,
  insertChallenge,
  insertFactor,
  markFactorVerified,
  spendChallenge,
  type FactorRow,
} from "../store/factors";
import { addRefreshToken, elevateSession } from "../store/sessions";
import { userById } from "../store/users";

/** /factors: MFA with TOTP and phone factors (auth-js `mfa.*`): enroll, challenge, verify, unenroll. */

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

const randomDigits = (length: number) => Array.from({ length }, () => String(randomInt(10))).join("");
const ipOf = (ip: string | undefined) => (ip && /^[0-9a-f.:]+$/i.test(ip) ? ip : null);

/** The caller's factor named in the path (`:id`). */
async function factorOf({ project, req, caller }: SessionCall): Promise<FactorRow> {
  const id = String(req.params.id);
  const factor = uuid.safeParse(id).success
    ? await factorOfUser(project.authPool, caller.user.id, id)
    : undefined;
  if (!factor) throw new AuthApiError(404, "mfa_factor_not_found", "Factor not found");
  return factor;
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
  factor: { type: "totp"; secret: string } | { type: "phone"; phone: string },
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

/** POST /factors/:id/challenge: a challenge to verify the factor against (a phone factor's code is sent). */
export async function challenge(call: SessionCall) {
  const { project, req, settings } = call;
  const factor = await factorOf(call);
  if (factor.factor_type === "phone") return challengePhone(call, factor);
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

/** POST /factors/:id/verify: a challenge's code checked once; the factor is verified and the session aal2. */
export async function verify(call: SessionCall) {
  const { ctx, project, req, settings, caller } = call;
  const factor = await factorOf(call);
  const isPhone = factor.factor_type === "phone";
  if (isPhone && settings.mfa_phone_verify_enabled !== true) {
    throw new AuthApiError(422, "mfa_phone_verify_not_enabled", "MFA verification is disabled for Phone");
  }
  if (!isPhone && settings.mfa_totp_verify_enabled === false) {
    throw new AuthApiError(422, "mfa_totp_verify_not_enabled", "MFA verification is disabled for TOTP");
  }
  const body = parse(verifyBody, req.body);
  const found = await challengeOf(project.authPool, body.challenge_id, factor.id);
  if (!found) throw new AuthApiError(404, "mfa_challenge_not_found", "Challenge not found");
  if (found.verified_at || Number(found.age) > CHALLENGE_SECONDS) {
    await deleteChallenge(project.authPool, found.id);
    throw new AuthApiError(
      422,
      "mfa_challenge_expired",
      `MFA challenge ${found.id} has expired, verify against another challenge or create a new challenge.`,
    );
  }
  const attempt = (factorType: string, valid: boolean) =>
    checkVerificationAttempt(
      project.authPool,
      settings,
      "mfa_verification_attempt",
      { user_id: caller.user.id, factor_id: factor.id, factor_type: factorType, valid },
      req.ip,
    );
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
    await attempt("phone", valid);
    // The challenge is spent at once: a code verifies one session once.
    if (!valid || !(await spendChallenge(project.authPool, found.id))) {
      throw new AuthApiError(422, "mfa_verification_failed", "Invalid MFA Phone code entered");
    }
    return verified(call, factor.id, "mfa/phone");
  }
  const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(factor.secret) });
  const now = Date.now();
  const delta = totp.validate({ token: body.code.trim(), timestamp: now, window: TOTP_WINDOW });
  await attempt("totp", delta !== null);
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
