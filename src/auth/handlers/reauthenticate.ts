import { withAdminTransaction } from "../../db/transaction";
import { mailed, smsSenderOf, type UserCall } from "../call";
import { AuthApiError, userNotFound } from "../errors";
import { issueToken } from "../otp";
import { sendPhoneOtp } from "../sms";

/**
 * GET /reauthenticate (auth-js reauthenticate): a nonce for a password change, by mail, or by SMS to a user
 * with only a phone.
 */
export async function reauthenticate(call: UserCall) {
  const { project, settings } = call;
  const { user } = call.caller;
  if (!user) throw userNotFound();
  if (!user.email && !user.phone)
    throw new AuthApiError(
      400,
      "validation_failed",
      "Reauthentication requires the user to have an email or a phone number",
    );
  if (!user.email) {
    if (!user.phone_confirmed_at)
      throw new AuthApiError(422, "phone_not_confirmed", "Please verify your phone first.");
    const messageId = await withAdminTransaction(project.authPool, (db) =>
      sendPhoneOtp(db, smsSenderOf(call), user, user.phone!, "reauthentication", "sms"),
    );
    return messageId ? { message_id: messageId } : {};
  }
  await withAdminTransaction(project.authPool, async (db) => {
    await issueToken(db, settings, user, "reauthentication", mailed(call, String(settings.site_url)));
  });
  return {};
}
