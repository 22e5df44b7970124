import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { noteRefusal } from "../authLogs";
import type { AuthCall } from "../call";
import { AuthApiError, emailOrPhoneOnly } from "../errors";
import { email, parse } from "../input";
import { applyToken, findToken, otpExpired, tokenHash, type VerifyType } from "../otp";
import { redirectTarget, withParams } from "../redirects";
import { sessionFragment, sessionResponse } from "../signIn";
import { providerVerifies, testOtp, validatePhone, verifyWithProvider } from "../sms";
import { issueLatestAuthCode } from "../store/flowState";
import { syncProviders, upsertPhoneIdentity } from "../store/identities";
import { deleteOneTimeTokens } from "../store/oneTimeTokens";
import { startSession } from "../store/sessions";
import { lockUserByPhone, setUser, userById } from "../store/users";

/**
 * /verify: a mailed link opened in the browser (GET, answered with a redirect), or a code or token hash the
 * client sends (POST, auth-js verifyOtp) for a mail or an SMS; a verified token signs the user in.
 */

const verifyBody = z.object({
  type: z.enum(["signup", "invite", "magiclink", "recovery", "email_change", "email"]),
  email: email.optional(),
  token: z.string().optional(),
  token_hash: z.string().optional(),
  redirect_to: z.string().optional(),
});
const phoneVerifyBody = z.object({
  type: z.enum(["sms", "phone_change"], { error: "Unsupported verification type" }),
  phone: z.string(),
  token: z.string(),
});

const LINK_TYPES = ["signup", "invite", "magiclink", "recovery", "email_change"];
const HALF_CONFIRMED = "Confirmation link accepted. Please proceed to confirm link sent to the other email";

/** GET /verify: the link's token verified, answered as a redirect carrying the session, a code or the error. */
export async function verifyLink(call: AuthCall) {
  const { req, res, settings } = call;
  const target = redirectTarget(settings, req.query.redirect_to);
  const type = String(req.query.type ?? "");
  const hash = String(req.query.token ?? "");
  try {
    if (!LINK_TYPES.includes(type) || !hash) throw otpExpired();
    const outcome = await verifyToken(call, type as VerifyType, { hash }, "link");
    if ("message" in outcome) {
      return res.redirect(303, withParams(target, { message: HALF_CONFIRMED }, "fragment"));
    }
    if ("code" in outcome && outcome.code) {
      return res.redirect(303, withParams(target, { code: outcome.code }, "query"));
    }
    const s = await sessionResponse(call, outcome.user, outcome.session!, "otp");
    return res.redirect(303, withParams(target, sessionFragment(s, { type }), "fragment"));
  } catch (e) {
    if (!(e instanceof AuthApiError) || e.status >= 500) throw e;
    noteRefusal(res, e);
    const description = e.errorCode === "otp_expired" ? "Email link is invalid or has expired" : e.message;
    return res.redirect(
      303,
      withParams(
        target,
        { error: "access_denied", error_code: e.errorCode, error_description: description },
        "fragment",
      ),
    );
  }
}

/** POST /verify: a mailed code (with its address) or token hash, or an SMS code, verified and signed in. */
export async function verifyOtp(call: AuthCall) {
  const { req } = call;
  if (req.body?.phone && !req.body?.email) return verifyPhone(call);
  if (req.body?.type === "sms" || req.body?.type === "phone_change") throw emailOrPhoneOnly(" on verify");
  const body = parse(verifyBody, req.body);
  let token: { hash: string } | { email: string; otp: string };
  if (body.token_hash) token = { hash: body.token_hash };
  else if (body.email && body.token) token = { email: body.email, otp: body.token.trim() };
  else throw emailOrPhoneOnly(" on verify");
  const outcome = await verifyToken(call, body.type, token, "api");
  if ("message" in outcome) return { msg: HALF_CONFIRMED };
  return sessionResponse(call, outcome.user, outcome.session!, "otp");
}

/** The session a verified token starts, or the redirect parameters of a PKCE flow or a half-done change. */
async function verifyToken(
  { project, settings }: AuthCall,
  type: VerifyType,
  token: { hash: string } | { email: string; otp: string },
  via: "link" | "api",
) {
  return withAdminTransaction(project.authPool, async (db) => {
    const found = await findToken(db, settings, type, token);
    const verified = await applyToken(db, settings, found.user, found.column);
    if (verified.kind === "half_confirmed") return { message: true as const, user: verified.user };
    // A PKCE flow's link answers a code for the browser; verifyOtp (the code typed in) signs in at once.
    if (found.pkce && via === "link") {
      const code = await issueLatestAuthCode(db, verified.user.id, type === "email" ? "magiclink" : type);
      if (code) return { code, user: verified.user };
    }
    return { user: verified.user, session: await startSession(db, verified.user.id, "otp") };
  });
}

/**
 * Verifies an SMS code (verifyOtp type sms or phone_change) as the platform: a test number's fixed code,
 * else Twilio Verify's check or the stored hash within sms_otp_exp; confirms the number or applies the
 * change, and starts an otp session.
 */
async function verifyPhone(call: AuthCall) {
  const { ctx, project, req, settings } = call;
  const body = parse(phoneVerifyBody, req.body);
  const phone = validatePhone(body.phone);
  const token = body.token.trim();
  const { user, session } = await withAdminTransaction(project.authPool, async (db) => {
    const user = await lockUserByPhone(db, body.type === "sms" ? "phone" : "phone_change", phone);
    if (!user) throw otpExpired();
    if (user.banned_until && user.banned_until.getTime() > Date.now())
      throw new AuthApiError(403, "user_banned", "User is banned");
    if (testOtp(settings, phone) !== token) {
      if (providerVerifies(settings)) {
        await verifyWithProvider(settings, ctx.config.smsProviderUrls, phone, token);
      } else {
        const expected = body.type === "sms" ? user.confirmation_token : user.phone_change_token;
        const sentAt = body.type === "sms" ? user.confirmation_sent_at : user.phone_change_sent_at;
        const hash = tokenHash(phone, token);
        const valid =
          Boolean(expected) &&
          sentAt !== null &&
          Date.now() - sentAt.getTime() <= (Number(settings.sms_otp_exp) || 60) * 1000 &&
          (expected === hash || expected === `pkce_${hash}`);
        if (!valid) throw otpExpired();
      }
    }
    const confirmed = await setUser(
      db,
      user.id,
      body.type === "sms"
        ? { confirmation_token: null, phone_confirmed_at: user.phone_confirmed_at ?? new Date() }
        : {
            phone,
            phone_change: null,
            phone_change_token: null,
            phone_change_sent_at: null,
            phone_confirmed_at: new Date(),
            is_anonymous: false,
          },
    );
    await deleteOneTimeTokens(db, user.id);
    await upsertPhoneIdentity(db, confirmed);
    await syncProviders(db, user.id);
    const verified = (await userById(db, user.id))!;
    return { user: verified, session: await startSession(db, user.id, "otp") };
  });
  return sessionResponse(call, user, session, "otp");
}
