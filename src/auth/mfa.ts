import { randomInt } from "node:crypto";
import { Router, type Request } from "express";
import { z } from "zod";
import * as OTPAuth from "otpauth";
import QRCode from "qrcode";
import type { ProjectRuntime } from "../projects/runtime";
import { AuthApiError } from "./errors";
import { checkVerificationAttempt } from "./hook";
import { tokenHash } from "./otp";
import {
  channelOf,
  checkFrequency,
  deliverSms,
  otpLength,
  providerVerifies,
  validatePhone,
  verifyWithProvider,
} from "./sms";
import type { AuthToolkit, Handle } from "./router";
import {
  addRefreshToken,
  elevateSession,
  factorsOf,
  sessionAssurance,
  userById,
  type FactorRow,
  type UserRow,
} from "./users";
import { withAdminTransaction } from "../db/transaction";
import type { AuthSettings } from "./authConfig";

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
const uuid = z.string().uuid();

function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AuthApiError(400, "validation_failed", `${issue.path.join(".") || "body"}: ${issue.message}`);
  }
  return parsed.data;
}

const randomDigits = (length: number) => Array.from({ length }, () => String(randomInt(10))).join("");

/** MFA with TOTP and phone factors (auth-js `mfa.*`): enroll, challenge, verify, unenroll. */
export function mfaRoutes(tk: AuthToolkit, handle: Handle): Router {
  const router = Router({ caseSensitive: true });

  async function signedIn(project: ProjectRuntime, req: Request) {
    const current = await tk.currentUser(project, req);
    if (!current.user || !current.sessionId) {
      throw new AuthApiError(
        401,
        "no_authorization",
        "This endpoint requires a session of the project's user",
      );
    }
    const assurance = await sessionAssurance(project.authPool, current.sessionId);
    return { user: current.user, sessionId: current.sessionId, aal: assurance?.aal ?? "aal1" };
  }

  async function factorOf(project: ProjectRuntime, userId: string, id: string): Promise<FactorRow> {
    const factor = uuid.safeParse(id).success
      ? (
          await project.authPool.query("select * from auth.mfa_factors where id = $1 and user_id = $2", [
            id,
            userId,
          ])
        ).rows[0]
      : undefined;
    if (!factor) throw new AuthApiError(404, "mfa_factor_not_found", "Factor not found");
    return factor;
  }

  async function checkFactorLimits(project: ProjectRuntime, userId: string, aal: string, max: number) {
    const factors = await factorsOf(project.authPool, userId);
    if (factors.some((f) => f.status === "verified") && aal !== "aal2") {
      throw new AuthApiError(422, "insufficient_aal", "AAL2 required to enroll a new factor");
    }
    if (factors.length >= max) {
      throw new AuthApiError(
        422,
        "too_many_enrolled_mfa_factors",
        "Maximum number of verified factors reached, unenroll to continue",
      );
    }
  }

  const nameConflict = (friendlyName: string) => (e: { code?: string }) => {
    if (e.code === "23505") {
      throw new AuthApiError(
        422,
        "mfa_factor_name_conflict",
        `A factor with the friendly name "${friendlyName}" for this user already exists`,
      );
    }
    throw e;
  };

  /** A phone factor (mfa_phone_enroll_enabled): unverified until a code sent to the number is verified. */
  async function enrollPhone(
    project: ProjectRuntime,
    userId: string,
    aal: string,
    body: z.infer<typeof enrollBody>,
  ) {
    const settings = await tk.settings(project);
    if (settings.mfa_phone_enroll_enabled !== true) {
      throw new AuthApiError(422, "mfa_phone_enroll_not_enabled", "MFA enroll is disabled for Phone");
    }
    if (!body.phone) {
      throw new AuthApiError(400, "validation_failed", "Phone number required to enroll Phone factor");
    }
    const phone = validatePhone(body.phone);
    const same = (await factorsOf(project.authPool, userId)).filter(
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
    await project.authPool.query("delete from auth.mfa_factors where id = any($1::uuid[])", [
      same.map((f) => f.id),
    ]);
    await checkFactorLimits(project, userId, aal, Number(settings.mfa_max_enrolled_factors ?? 10));
    const friendlyName = body.friendly_name ?? "";
    const { rows } = await project.authPool
      .query(
        `insert into auth.mfa_factors (user_id, friendly_name, factor_type, status, phone)
         values ($1, $2, 'phone', 'unverified', $3) returning *`,
        [userId, friendlyName, phone],
      )
      .catch(nameConflict(friendlyName));
    return { id: rows[0].id, type: "phone", friendly_name: friendlyName, phone: body.phone };
  }

  router.post(
    "/factors",
    handle(async (project, req) => {
      const { user, aal } = await signedIn(project, req);
      const settings = await tk.settings(project);
      const body = parseBody(enrollBody, req.body);
      if (body.factor_type === "phone") return enrollPhone(project, user.id, aal, body);
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
      await checkFactorLimits(project, user.id, aal, Number(settings.mfa_max_enrolled_factors ?? 10));
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
      const uri = new OTPAuth.TOTP({ issuer, label: user.email || user.id, secret }).toString();
      const { rows } = await project.authPool
        .query(
          `insert into auth.mfa_factors (user_id, friendly_name, factor_type, status, secret)
           values ($1, $2, 'totp', 'unverified', $3) returning *`,
          [user.id, friendlyName, secret],
        )
        .catch(nameConflict(friendlyName));
      const svg = await QRCode.toString(uri, { type: "svg" });
      return {
        id: rows[0].id,
        type: "totp",
        friendly_name: friendlyName,
        totp: { qr_code: `data:image/svg+xml;utf-8,${svg}`, secret, uri },
      };
    }),
  );

  const ipOf = (req: Request) => (req.ip && /^[0-9a-f.:]+$/i.test(req.ip) ? req.ip : null);

  /**
   * A phone factor's challenge (mfa_phone_verify_enabled): a code of mfa_phone_otp_length sent with
   * mfa_phone_template through the send-SMS hook or the provider, at most every mfa_phone_max_frequency
   * seconds; only its hash is kept with the challenge.
   */
  async function challengePhone(project: ProjectRuntime, req: Request, user: UserRow, factor: FactorRow) {
    const settings = await tk.settings(project);
    if (settings.mfa_phone_verify_enabled !== true) {
      throw new AuthApiError(422, "mfa_phone_verify_not_enabled", "MFA verification is disabled for Phone");
    }
    const channel = channelOf(settings, parseBody(challengeBody, req.body).channel);
    checkFrequency(factor.last_challenged_at, Number(settings.mfa_phone_max_frequency ?? 60));
    const phone = factor.phone ?? "";
    const otp = randomDigits(otpLength(settings.mfa_phone_otp_length));
    const { rows } = await withAdminTransaction(project.authPool, async (db) => {
      const created = await db.query(
        `with c as (insert into auth.mfa_challenges (factor_id, ip_address, otp_code) values ($1, $2, $3)
                    returning *),
              f as (update auth.mfa_factors set last_challenged_at = now() where id = $1)
         select id, extract(epoch from created_at)::bigint + $4 as expires_at from c`,
        [factor.id, ipOf(req), tokenHash(phone, otp), CHALLENGE_SECONDS],
      );
      await deliverSms(db, tk.smsSender(project, settings, req), user, {
        phone,
        otp,
        channel,
        template: settings.mfa_phone_template,
        type: "mfa",
        what: "mfa",
      });
      return created;
    });
    return { id: rows[0].id, type: "phone", expires_at: Number(rows[0].expires_at) };
  }

  router.post(
    "/factors/:id/challenge",
    handle(async (project, req) => {
      const { user } = await signedIn(project, req);
      const settings = await tk.settings(project);
      const factor = await factorOf(project, user.id, String(req.params.id));
      if (factor.factor_type === "phone") return challengePhone(project, req, user, factor);
      if (settings.mfa_totp_verify_enabled === false) {
        throw new AuthApiError(422, "mfa_totp_verify_not_enabled", "MFA verification is disabled for TOTP");
      }
      const { rows } = await project.authPool.query(
        `with c as (insert into auth.mfa_challenges (factor_id, ip_address) values ($1, $2) returning *),
              f as (update auth.mfa_factors set last_challenged_at = now() where id = $1)
         select id, extract(epoch from created_at)::bigint + $3 as expires_at from c`,
        [factor.id, ipOf(req), CHALLENGE_SECONDS],
      );
      return { id: rows[0].id, type: "totp", expires_at: Number(rows[0].expires_at) };
    }),
  );

  router.post(
    "/factors/:id/verify",
    handle(async (project, req) => {
      const { user, sessionId } = await signedIn(project, req);
      const settings = await tk.settings(project);
      const factor = await factorOf(project, user.id, String(req.params.id));
      const isPhone = factor.factor_type === "phone";
      if (isPhone && settings.mfa_phone_verify_enabled !== true) {
        throw new AuthApiError(422, "mfa_phone_verify_not_enabled", "MFA verification is disabled for Phone");
      }
      if (!isPhone && settings.mfa_totp_verify_enabled === false) {
        throw new AuthApiError(422, "mfa_totp_verify_not_enabled", "MFA verification is disabled for TOTP");
      }
      const body = parseBody(verifyBody, req.body);
      const { rows } = await project.authPool.query(
        `select id, verified_at, otp_code, host(ip_address) as ip, extract(epoch from now() - created_at) as age
           from auth.mfa_challenges where id = $1 and factor_id = $2`,
        [body.challenge_id, factor.id],
      );
      const challenge = rows[0];
      if (!challenge) throw new AuthApiError(404, "mfa_challenge_not_found", "Challenge not found");
      if (challenge.verified_at || Number(challenge.age) > CHALLENGE_SECONDS) {
        await project.authPool.query("delete from auth.mfa_challenges where id = $1", [challenge.id]);
        throw new AuthApiError(
          422,
          "mfa_challenge_expired",
          `MFA challenge ${challenge.id} has expired, verify against another challenge or create a new challenge.`,
        );
      }
      if (isPhone) {
        if (challenge.ip !== ipOf(req)) {
          throw new AuthApiError(
            422,
            "mfa_ip_address_mismatch",
            "Challenge and verify IP addresses mismatch",
          );
        }
        let valid: boolean;
        if (providerVerifies(settings)) {
          await verifyWithProvider(
            settings,
            tk.ctx.config.smsProviderUrls,
            factor.phone ?? "",
            body.code.trim(),
          );
          valid = true;
        } else {
          valid = challenge.otp_code === tokenHash(factor.phone ?? "", body.code.trim());
        }
        await checkVerificationAttempt(
          project.authPool,
          settings,
          "mfa_verification_attempt",
          { user_id: user.id, factor_id: factor.id, factor_type: "phone", valid },
          req.ip,
        );
        if (!valid) throw new AuthApiError(422, "mfa_verification_failed", "Invalid MFA Phone code entered");
        // The challenge is spent at once: a code verifies one session once.
        const spent = await project.authPool.query(
          "update auth.mfa_challenges set verified_at = now() where id = $1 and verified_at is null",
          [challenge.id],
        );
        if (spent.rowCount !== 1) {
          throw new AuthApiError(422, "mfa_verification_failed", "Invalid MFA Phone code entered");
        }
        return verified(project, req, user.id, sessionId, factor.id, "mfa/phone", settings);
      }
      const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(factor.secret) });
      const now = Date.now();
      const delta = totp.validate({ token: body.code.trim(), timestamp: now, window: TOTP_WINDOW });
      await checkVerificationAttempt(
        project.authPool,
        settings,
        "mfa_verification_attempt",
        { user_id: user.id, factor_id: factor.id, factor_type: "totp", valid: delta !== null },
        req.ip,
      );
      if (delta === null) {
        throw new AuthApiError(422, "mfa_verification_failed", "Invalid TOTP code entered");
      }
      // Each time step's code verifies once: the step is claimed atomically, so a replayed code (or a
      // concurrent second use) is refused like a wrong one.
      const step = totp.counter({ timestamp: now }) + delta;
      const claimed = await project.authPool.query(
        `update auth.mfa_factors set last_totp_step = $2
          where id = $1 and (last_totp_step is null or last_totp_step < $2)`,
        [factor.id, step],
      );
      if (claimed.rowCount !== 1) {
        throw new AuthApiError(422, "mfa_verification_failed", "Invalid TOTP code entered");
      }
      await project.authPool.query("update auth.mfa_challenges set verified_at = now() where id = $1", [
        challenge.id,
      ]);
      return verified(project, req, user.id, sessionId, factor.id, "totp", settings);
    }),
  );

  /** A verified factor: the factor is verified, the session raised to aal2 and answered as a fresh pair. */
  async function verified(
    project: ProjectRuntime,
    req: Request,
    userId: string,
    sessionId: string,
    factorId: string,
    method: string,
    settings: AuthSettings,
  ) {
    await project.authPool.query(
      "update auth.mfa_factors set status = 'verified', updated_at = now() where id = $1",
      [factorId],
    );
    await elevateSession(project.authPool, sessionId, factorId, method);
    const refreshToken = await addRefreshToken(project.authPool, sessionId, userId, null);
    return tk.sessionResponse(
      project,
      req,
      (await userById(project.authPool, userId))!,
      { sessionId, refreshToken },
      settings,
      method,
    );
  }

  router.delete(
    "/factors/:id",
    handle(async (project, req) => {
      const { user, aal } = await signedIn(project, req);
      const factor = await factorOf(project, user.id, String(req.params.id));
      const anyVerified = (await factorsOf(project.authPool, user.id)).some((f) => f.status === "verified");
      if (anyVerified && aal !== "aal2") {
        throw new AuthApiError(422, "insufficient_aal", "AAL2 required to unenroll verified factor");
      }
      await project.authPool.query("delete from auth.mfa_factors where id = $1", [factor.id]);
      return { id: factor.id };
    }),
  );

  return router;
}
