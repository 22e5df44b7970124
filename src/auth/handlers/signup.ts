import { randomUUID } from "node:crypto";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import { mailed, smsSenderOf, type AuthCall } from "../call";
import { AuthApiError, phoneExists, signupDisabled } from "../errors";
import { afterUserCreated, beforeUserCreated } from "../hook";
import { email, metadata, parse, pkceFields, pkceOf, takesPhoneFlow } from "../input";
import { issueToken } from "../otp";
import { checkPassword, hashPassword } from "../passwords";
import { requireEmailProvider, requirePhoneProvider } from "../providers";
import { redirectTarget } from "../redirects";
import { sessionResponse, type Session } from "../signIn";
import { channelOf, sendPhoneOtp, validatePhone } from "../sms";
import { startSession } from "../store/sessions";
import {
  apiUser,
  insertAnonymousUser,
  insertPhoneUser,
  insertUser,
  userByEmail,
  userById,
  userByPhone,
  type UserRow,
} from "../store/users";

/** POST /signup (auth-js signUp, signInAnonymously): by email and password, phone and password, or anonymously. */

const PHONE_APP = { provider: "phone", providers: ["phone"] };

const signupBody = z.object({ email, password: z.string(), data: metadata.nullish(), ...pkceFields });
const phoneSignupBody = z.object({
  phone: z.string(),
  password: z.string(),
  data: metadata.nullish(),
  channel: z.string().nullish(),
});

export async function signUp(call: AuthCall) {
  const { project, req, settings } = call;
  if (settings.disable_signup) throw signupDisabled();
  if (req.body?.email === undefined && req.body?.password === undefined) return signUpAnonymously(call);
  if (takesPhoneFlow(req.body, " on signup.")) return signUpWithPhone(call);
  requireEmailProvider(settings, "signups");
  const body = parse(signupBody, req.body);
  const pkce = pkceOf(body);
  checkPassword(body.password, settings);
  const redirectTo = redirectTarget(settings, req.query.redirect_to);
  const passwordHash = await hashPassword(body.password);
  const result = await withAdminTransaction(project.authPool, async (db): Promise<SignUpResult> => {
    const existing = await userByEmail(db, body.email);
    // With autoconfirm, a sign-up never opens an existing account (confirmed or not): whoever signs up
    // again has not shown the password.
    if (existing && settings.mailer_autoconfirm) {
      throw new AuthApiError(422, "user_already_exists", "User already registered");
    }
    if (existing?.email_confirmed_at) {
      return { obfuscated: obfuscatedUser(body.email, body.data ?? {}) };
    }
    // An unconfirmed user is not changed (who signs up again may not own the address): only the
    // confirmation mail is sent again.
    const created = existing
      ? undefined
      : (await insertUser(db, {
          email: body.email,
          passwordHash,
          confirmed: Boolean(settings.mailer_autoconfirm),
          metadata: body.data ?? {},
        }))!;
    if (created) await beforeUserCreated(project.authPool, settings, created, req.ip);
    const user = (existing ?? created)!;
    if (settings.mailer_autoconfirm) {
      return { user, created, session: await startSession(db, user.id, "password") };
    }
    await issueToken(db, settings, user, "confirmation", mailed(call, redirectTo, pkce));
    return { user: (await userById(db, user.id))!, created };
  });
  return answerSignUp(call, result);
}

/** Anonymous sign-in (auth-js signInAnonymously): when enabled, within rate_limit_anonymous_users per hour. */
async function signUpAnonymously(call: AuthCall) {
  const { project, req, settings } = call;
  if (!settings.external_anonymous_users_enabled) {
    throw new AuthApiError(422, "anonymous_provider_disabled", "Anonymous sign-ins are disabled");
  }
  // Counted here, as the platform does: only a sign-up without an address or number is anonymous.
  await call.consume("anon");
  const data = parse(z.object({ data: metadata.nullish() }), req.body).data;
  const { user, session } = await withAdminTransaction(project.authPool, async (db) => {
    const inserted = await insertAnonymousUser(db, data ?? {});
    await beforeUserCreated(project.authPool, settings, inserted, req.ip);
    return { user: inserted, session: await startSession(db, inserted.id, "anonymous") };
  });
  await afterUserCreated(project.authPool, settings, user, req.ip);
  return sessionResponse(call, user, session, "anonymous");
}

/** Phone sign-up (auth-js signUp({phone, password})): a code by SMS unless sms_autoconfirm. */
async function signUpWithPhone(call: AuthCall) {
  const { project, req, settings } = call;
  requirePhoneProvider(settings, 400, "Phone signups are disabled");
  const body = parse(phoneSignupBody, req.body);
  if (req.body?.code_challenge) {
    throw new AuthApiError(400, "validation_failed", "PKCE not supported for phone signups");
  }
  const phone = validatePhone(body.phone);
  const channel = channelOf(settings, body.channel);
  checkPassword(body.password, settings);
  const passwordHash = await hashPassword(body.password);
  const result = await withAdminTransaction(project.authPool, async (db): Promise<SignUpResult> => {
    const existing = await userByPhone(db, phone);
    // A confirmed number is not signed up again (an obfuscated user unless sign-ups are autoconfirmed, as
    // the platform); with sms_autoconfirm an unconfirmed one is not opened either (no proof of the number).
    // Else an unconfirmed user is left unchanged and only gets a new code.
    if (
      existing &&
      (settings.sms_autoconfirm || (existing.phone_confirmed_at && settings.mailer_autoconfirm))
    ) {
      throw new AuthApiError(422, "user_already_exists", "User already registered");
    }
    if (existing?.phone_confirmed_at) {
      return { obfuscated: { ...obfuscatedUser("", body.data ?? {}), phone, app_metadata: PHONE_APP } };
    }
    const created = existing
      ? undefined
      : await insertPhoneUser(db, {
          phone,
          passwordHash,
          confirmed: Boolean(settings.sms_autoconfirm),
          metadata: body.data ?? {},
        });
    if (!existing && !created) throw phoneExists();
    if (created) await beforeUserCreated(project.authPool, settings, created, req.ip);
    const user = (existing ?? created)!;
    if (settings.sms_autoconfirm) {
      return { user, created, session: await startSession(db, user.id, "password") };
    }
    await sendPhoneOtp(db, smsSenderOf(call), user, phone, "confirmation", channel);
    return { user: (await userById(db, user.id))!, created };
  });
  return answerSignUp(call, result);
}

type SignUpResult = { obfuscated: unknown } | { user: UserRow; created?: UserRow; session?: Session };

/**
 * A sign-up's answer, by email or phone: the obfuscated user for a taken address, else (after the
 * after-user-created hook) a session when sign-ups are autoconfirmed, the user otherwise.
 */
async function answerSignUp(call: AuthCall, result: SignUpResult) {
  if ("obfuscated" in result) return result.obfuscated;
  if (result.created)
    await afterUserCreated(call.project.authPool, call.settings, result.created, call.req.ip);
  if (result.session) return sessionResponse(call, result.user, result.session, "password");
  return apiUser(call.project.authPool, result.user);
}

/** The user as a repeated sign-up of a confirmed address sees it: a made-up id, nothing stored or sent. */
function obfuscatedUser(address: string, data: Record<string, unknown>) {
  const now = new Date();
  return {
    id: randomUUID(),
    aud: "authenticated",
    role: "authenticated",
    email: address,
    phone: "",
    confirmation_sent_at: now,
    app_metadata: { provider: "email", providers: ["email"] },
    user_metadata: data,
    identities: [],
    created_at: now,
    updated_at: now,
    is_anonymous: false,
  };
}
