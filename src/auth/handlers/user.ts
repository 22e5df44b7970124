import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { mailed, smsSenderOf, type UserCall } from "../call";
import { AuthApiError, emailExists, phoneExists, userNotFound } from "../errors";
import { email, metadata, parse, pkceFields, pkceOf } from "../input";
import { applyToken, sendEmailChange, tokenHash } from "../otp";
import { checkPassword, hashPassword, verifyPassword } from "../passwords";
import { redirectTarget } from "../redirects";
import { channelOf, providerVerifies, sendPhoneOtp, validatePhone, verifyWithProvider } from "../sms";
import { factorsOf } from "../store/factors";
import { syncProviders, upsertPhoneIdentity } from "../store/identities";
import { endSessions, sessionAgeSeconds, sessionAssurance } from "../store/sessions";
import {
  apiUser,
  mergeUserMetadata,
  setUser,
  userByEmail,
  userById,
  userByPhone,
  type UserRow,
} from "../store/users";

/** /user: the signed-in user (GET, auth-js getUser) and its changes (PUT, updateUser). */

/** Sessions older than this need a reauthentication nonce to change the password (when required). */
const REAUTH_SESSION_SECONDS = 24 * 3600;

const userUpdateBody = z.object({
  email: email.optional(),
  password: z.string().optional(),
  data: metadata.optional(),
  nonce: z.string().optional(),
  phone: z.string().optional(),
  channel: z.string().nullish(),
  ...pkceFields,
});

export async function getUser({ project, caller: { claims, user } }: UserCall) {
  if (user) return apiUser(project.authPool, user);
  // A third-party token: the user is what its claims say.
  return {
    id: claims.sub,
    aud: claims.aud ?? "",
    role: claims.role,
    email: claims.email ?? "",
    app_metadata: claims.app_metadata ?? {},
    user_metadata: claims.user_metadata ?? {},
    created_at: "",
    is_anonymous: false,
  };
}

/**
 * Changes the user's metadata, password (AAL2 when it has a verified factor; a nonce when required), email
 * (confirmed by mail unless mailer_autoconfirm) and phone (by SMS code unless sms_autoconfirm).
 */
export async function updateUser(call: UserCall) {
  const { project, req, settings } = call;
  const { user, sessionId } = call.caller;
  if (!user) throw userNotFound();
  const body = parse(userUpdateBody, req.body);
  const pkce = pkceOf(body);
  const redirectTo = redirectTarget(settings, req.query.redirect_to);
  let passwordHash: string | undefined;
  if (body.password !== undefined) {
    const assurance = sessionId ? await sessionAssurance(project.authPool, sessionId) : undefined;
    const verified = (await factorsOf(project.authPool, user.id)).some((f) => f.status === "verified");
    if (verified && assurance?.aal !== "aal2") {
      throw new AuthApiError(
        401,
        "insufficient_aal",
        "AAL2 session is required to update email or password when MFA is enabled.",
      );
    }
    checkPassword(body.password, settings);
    if (user.encrypted_password && (await verifyPassword(body.password, user.encrypted_password))) {
      throw new AuthApiError(422, "same_password", "New password should be different from the old password.");
    }
    await checkNonce(call, user, body.nonce);
    passwordHash = await hashPassword(body.password);
  }
  let newPhone: string | undefined;
  let channel: "sms" | "whatsapp" = "sms";
  if (body.phone) {
    const phone = validatePhone(body.phone);
    if (phone !== user.phone) {
      if (user.is_sso_user) {
        throw new AuthApiError(
          422,
          "user_sso_managed",
          "Updating email, phone, password of a SSO account only possible via SSO",
        );
      }
      if (await userByPhone(project.authPool, phone)) throw phoneExists();
      channel = channelOf(settings, body.channel);
      newPhone = phone;
    }
  }
  const changesEmail = body.email !== undefined && body.email !== user.email;
  if (changesEmail && (await userByEmail(project.authPool, body.email!))) throw emailExists();
  await withAdminTransaction(project.authPool, async (db) => {
    if (body.data) await mergeUserMetadata(db, user.id, "raw_user_meta_data", body.data);
    if (passwordHash) {
      await setUser(db, user.id, { encrypted_password: passwordHash, reauthentication_token: null });
      // A new password ends every other session of the user.
      await endSessions(db, user.id, sessionId, "others");
    }
    if (changesEmail) {
      if (settings.mailer_autoconfirm) {
        const changed = await setUser(db, user.id, { email_change: body.email });
        await applyToken(
          db,
          { ...settings, mailer_secure_email_change_enabled: false },
          changed,
          "email_change_token_new",
        );
      } else {
        const changing = await setUser(db, user.id, {
          email_change: body.email,
          email_change_confirm_status: 0,
        });
        await sendEmailChange(db, settings, changing, mailed(call, redirectTo, pkce));
      }
    }
    if (newPhone !== undefined) {
      const current = (await userById(db, user.id))!;
      if (settings.sms_autoconfirm) {
        // Confirmed at once, as a verified change would be.
        const changed = await setUser(db, user.id, {
          phone: newPhone,
          phone_change: null,
          phone_change_token: null,
          phone_confirmed_at: new Date(),
          is_anonymous: false,
        });
        await upsertPhoneIdentity(db, changed);
        await syncProviders(db, user.id);
      } else {
        await sendPhoneOtp(db, smsSenderOf(call), current, newPhone, "phone_change", channel);
      }
    }
  }).catch((e) => {
    if (e.code === "23505" && e.constraint === "users_phone_key") throw phoneExists();
    if (e.code === "23505") throw emailExists();
    throw e;
  });
  return apiUser(project.authPool, (await userById(project.authPool, user.id))!);
}

/**
 * With security_update_password_require_reauthentication, a session older than 24 hours needs the code
 * of a reauthentication mail; a nonce given is always checked.
 */
async function checkNonce(call: UserCall, user: UserRow, nonce: string | undefined) {
  const { ctx, project, settings } = call;
  if (!settings.security_update_password_require_reauthentication) return;
  if (nonce === undefined) {
    const age = await sessionAgeSeconds(project.authPool, call.caller.sessionId);
    if (age !== undefined && age < REAUTH_SESSION_SECONDS) return;
    throw new AuthApiError(400, "reauthentication_needed", "Password update requires reauthentication");
  }
  const sentAt = user.reauthentication_sent_at;
  if (!user.email && user.phone && providerVerifies(settings)) {
    await verifyWithProvider(settings, ctx.config.smsProviderUrls, user.phone, nonce.trim());
    return;
  }
  // The nonce was mailed to the address, or sent by SMS to a user with only a phone.
  const to = user.email || user.phone || "";
  const ttl = Number(user.email ? (settings.mailer_otp_exp ?? 3600) : Number(settings.sms_otp_exp) || 60);
  const valid =
    user.reauthentication_token !== null &&
    user.reauthentication_token === tokenHash(to, nonce.trim()) &&
    sentAt !== null &&
    Date.now() - sentAt.getTime() <= ttl * 1000;
  if (!valid) throw new AuthApiError(400, "reauthentication_not_valid", "Invalid nonce");
}
