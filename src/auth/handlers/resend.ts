import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { mailed, smsSenderOf, type AuthCall } from "../call";
import { AuthApiError, emailOrPhoneOnly } from "../errors";
import { email, parse, pkceFields, pkceOf } from "../input";
import { issueToken, sendEmailChange } from "../otp";
import { requirePhoneProvider } from "../providers";
import { redirectTarget } from "../redirects";
import { sendPhoneOtp, validatePhone } from "../sms";
import { lockUserByEmailChange, lockUserByPhoneChange, userByEmail, userByPhone } from "../store/users";

/**
 * POST /resend (auth-js resend): the sign-up confirmation or the email change mail again, or a phone
 * sign-up (type sms) or phone change code.
 */

const resendBody = z.object({ type: z.enum(["signup", "email_change"]), email, ...pkceFields });
const phoneResendBody = z.object({ type: z.enum(["sms", "phone_change"]), phone: z.string() });

export async function resend(call: AuthCall) {
  const { project, req, settings } = call;
  if (req.body?.type === "sms" || req.body?.type === "phone_change") return resendPhone(call);
  const body = parse(resendBody, req.body);
  const pkce = pkceOf(body);
  const redirectTo = redirectTarget(settings, req.query.redirect_to);
  await withAdminTransaction(project.authPool, async (db) => {
    if (body.type === "signup") {
      const user = await userByEmail(db, body.email);
      if (!user || user.email_confirmed_at) return;
      await issueToken(db, settings, user, "confirmation", mailed(call, redirectTo, pkce));
      return;
    }
    const changing = await lockUserByEmailChange(db, body.email);
    if (changing) await sendEmailChange(db, settings, changing, mailed(call, redirectTo, pkce));
  });
  return {};
}

async function resendPhone(call: AuthCall) {
  const { project, req, settings } = call;
  if (req.body?.email) throw emailOrPhoneOnly(".");
  if (!req.body?.phone && req.body?.type === "sms")
    throw new AuthApiError(400, "validation_failed", "Type provided requires a phone number");
  const body = parse(phoneResendBody, req.body);
  requirePhoneProvider(settings, 400, "Phone logins are disabled");
  const phone = validatePhone(body.phone);
  const messageId = await withAdminTransaction(project.authPool, async (db) => {
    const sender = smsSenderOf(call);
    if (body.type === "sms") {
      const user = await userByPhone(db, phone);
      if (!user || user.phone_confirmed_at) return "";
      return sendPhoneOtp(db, sender, user, phone, "confirmation", "sms");
    }
    // The user asked for the change: found by its pending number (or its current one, as the platform).
    const user = await lockUserByPhoneChange(db, phone);
    if (!user) return "";
    return sendPhoneOtp(db, sender, user, user.phone_change!, "phone_change", "sms");
  });
  return messageId ? { message_id: messageId } : {};
}
