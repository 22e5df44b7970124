import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { mailed, smsSenderOf, type AuthCall } from "../call";
import { AuthApiError, phoneExists, signupDisabled } from "../errors";
import { afterUserCreated, beforeUserCreated } from "../hook";
import { email, metadata, parse, pkceFields, pkceOf, takesPhoneFlow } from "../input";
import { issueToken } from "../otp";
import { requireEmailProvider, requirePhoneProvider } from "../providers";
import { redirectTarget } from "../redirects";
import { channelOf, sendPhoneOtp, validatePhone } from "../sms";
import { insertPhoneUser, insertUser, userByEmail, userByPhone, type UserRow } from "../store/users";

/**
 * POST /otp (auth-js signInWithOtp): a magic link or code by mail (a confirmed user) or a sign-up
 * confirmation (a new or unconfirmed one); a code by SMS for a phone number.
 */

const otpBody = z.object({
  email,
  data: metadata.nullish(),
  create_user: z.boolean().optional(),
  ...pkceFields,
});
const phoneOtpBody = z.object({
  phone: z.string(),
  data: metadata.nullish(),
  create_user: z.boolean().optional(),
  channel: z.string().nullish(),
});

const otpDisabled = () => new AuthApiError(422, "otp_disabled", "Signups not allowed for otp");

export async function sendOtp(call: AuthCall) {
  const { project, req, settings } = call;
  if (takesPhoneFlow(req.body, "")) return sendPhoneOtpCode(call);
  requireEmailProvider(settings, "logins");
  const body = parse(otpBody, req.body);
  const pkce = pkceOf(body);
  const redirectTo = redirectTarget(settings, req.query.redirect_to);
  const created = await withAdminTransaction(project.authPool, async (db) => {
    let user = await userByEmail(db, body.email);
    let inserted: UserRow | undefined;
    if (!user) {
      if (body.create_user === false) throw otpDisabled();
      if (settings.disable_signup) throw signupDisabled();
      user = inserted = (await insertUser(db, {
        email: body.email,
        passwordHash: null,
        confirmed: false,
        metadata: body.data ?? {},
      }))!;
      await beforeUserCreated(project.authPool, settings, inserted, req.ip);
    }
    const kind = user.email_confirmed_at ? "magic_link" : "confirmation";
    await issueToken(db, settings, user, kind, mailed(call, redirectTo, pkce));
    return inserted;
  });
  if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
  return {};
}

/** A code by SMS to sign in with (signInWithOtp({phone})), signing the number up when new. */
async function sendPhoneOtpCode(call: AuthCall) {
  const { project, req, settings } = call;
  const body = parse(phoneOtpBody, req.body);
  if (body.create_user === false) {
    const phone = validatePhone(body.phone);
    if (!(await userByPhone(project.authPool, phone))) throw otpDisabled();
  }
  requirePhoneProvider(settings, 400, "Unsupported phone provider");
  const phone = validatePhone(body.phone);
  const channel = channelOf(settings, body.channel);
  const { created, messageId } = await withAdminTransaction(project.authPool, async (db) => {
    let user = await userByPhone(db, phone);
    let inserted: UserRow | undefined;
    if (!user) {
      if (settings.disable_signup) throw signupDisabled();
      inserted = await insertPhoneUser(db, {
        phone,
        passwordHash: null,
        confirmed: Boolean(settings.sms_autoconfirm),
        metadata: body.data ?? {},
      });
      if (!inserted) throw phoneExists();
      await beforeUserCreated(project.authPool, settings, inserted, req.ip);
      user = inserted;
    }
    return {
      created: inserted,
      messageId: await sendPhoneOtp(db, smsSenderOf(call), user, phone, "confirmation", channel),
    };
  });
  if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
  return messageId ? { message_id: messageId } : {};
}
