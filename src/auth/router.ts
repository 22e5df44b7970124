import { createHash, randomUUID } from "node:crypto";
import express, {
  Router,
  type NextFunction,
  type Request,
  type RequestHandler,
  type Response,
} from "express";
import { RateLimiterRes, type RateLimiterPostgres } from "rate-limiter-flexible";
import { z } from "zod";
import type pg from "pg";
import type { AppContext } from "../context";
import { withAdminTransaction } from "../db/transaction";
import { postgresRateLimiter } from "../http/rateLimiter";
import { applySbForwardedFor, isCaptchaRoute, SBFF_HEADER, verifyCaptcha } from "./captcha";
import { isLeakedPassword } from "./leakedPasswords";
import { bearerAuthOf, GateError, openDataRequest, openProject, type GateErrorCode } from "../http/gate";
import type { ProjectRuntime } from "../projects/runtime";
import type { RequestAuth } from "./dataAuth";
import { authSettings, type AuthSettings } from "./authConfig";
import { AUTH_BODY_LIMIT, AuthApiError, bodyTooLarge } from "./errors";
import { recordAuthEvents, type AuthLogLocals } from "./authLogs";
import { afterUserCreated, beforeUserCreated, checkVerificationAttempt, runAccessTokenHook } from "./hook";
import { signProjectToken } from "./issueToken";
import { adminRoutes } from "./admin";
import { mfaRoutes } from "./mfa";
import { oauthRoutes } from "./oauth";
import { samlRoutes } from "./saml";
import {
  applyToken,
  findToken,
  issueAuthCode,
  issueToken,
  otpExpired,
  tokenHash,
  type Pkce,
  type VerifyType,
} from "./otp";
import { hashPassword, MAX_PASSWORD_BYTES, verifyPassword } from "./passwords";
import {
  channelOf,
  providerVerifies,
  sendPhoneOtp,
  testOtp,
  validatePhone,
  formatPhone,
  verifyWithProvider,
  type SmsSender,
} from "./sms";
import { redirectTarget, withParams } from "./redirects";
import { publishedJwks } from "./signingKeys";
import {
  apiUser,
  endSessions,
  factorsOf,
  insertAnonymousUser,
  insertPhoneUser,
  insertUser,
  mergeUserMetadata,
  refreshSession,
  sessionAssurance,
  sessionExists,
  setUser,
  startSession,
  syncProviders,
  upsertPhoneIdentity,
  userByEmail,
  userById,
  userByPhone,
  type UserRow,
} from "./users";

export { AuthApiError };

/** The auth server's `error_code` for each refusal of the data gate. */
const AUTH_ERROR_CODES: Record<GateErrorCode, string> = {
  no_api_key: "invalid_api_key",
  invalid_api_key: "invalid_api_key",
  invalid_jwt: "bad_jwt",
  project_not_found: "not_found",
  project_paused: "project_paused",
  project_not_ready: "project_not_ready",
};

const JWKS_MAX_AGE_SECONDS = 600;
const PHONE_APP = { provider: "phone", providers: ["phone"] };
/** The windows the auth server counts in: token requests per 5 minutes, anonymous sign-ins and mail per hour. */
const RATE_WINDOW_SECONDS = 300;
const HOUR_SECONDS = 3600;
/** A PKCE auth code is exchanged within 5 minutes of being issued. */
const AUTH_CODE_SECONDS = 300;
/** Sessions older than this need a reauthentication nonce to change the password (when required). */
const REAUTH_SESSION_SECONDS = 24 * 3600;

const email = z.string().trim().toLowerCase().email();
const pkceFields = {
  code_challenge: z.string().nullish(),
  code_challenge_method: z.string().nullish(),
};
const metadata = z.record(z.string(), z.unknown());
const credentialsBody = z.object({ email, password: z.string() });
const signupBody = credentialsBody.extend({ data: metadata.nullish(), ...pkceFields });
const phoneSignupBody = z.object({
  phone: z.string(),
  password: z.string(),
  data: metadata.nullish(),
  channel: z.string().nullish(),
});
const phonePasswordBody = z.object({ phone: z.string(), password: z.string() });
const phoneOtpBody = z.object({
  phone: z.string(),
  data: metadata.nullish(),
  create_user: z.boolean().optional(),
  channel: z.string().nullish(),
});
const phoneResendBody = z.object({ type: z.enum(["sms", "phone_change"]), phone: z.string() });
const phoneVerifyBody = z.object({
  type: z.enum(["sms", "phone_change"], { error: "Unsupported verification type" }),
  phone: z.string(),
  token: z.string(),
});
const otpBody = z.object({
  email,
  data: metadata.nullish(),
  create_user: z.boolean().optional(),
  ...pkceFields,
});
const recoverBody = z.object({ email, ...pkceFields });
const resendBody = z.object({ type: z.enum(["signup", "email_change"]), email, ...pkceFields });
const verifyBody = z.object({
  type: z.enum(["signup", "invite", "magiclink", "recovery", "email_change", "email"]),
  email: email.optional(),
  token: z.string().optional(),
  token_hash: z.string().optional(),
  redirect_to: z.string().optional(),
});
const refreshBody = z.object({ refresh_token: z.string().min(1) });
const pkceBody = z.object({ auth_code: z.string().min(1), code_verifier: z.string().min(1) });
const userUpdateBody = z.object({
  email: email.optional(),
  password: z.string().optional(),
  data: metadata.optional(),
  nonce: z.string().optional(),
  phone: z.string().optional(),
  channel: z.string().nullish(),
  ...pkceFields,
});

export function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AuthApiError(400, "validation_failed", `${issue.path.join(".") || "body"}: ${issue.message}`);
  }
  return parsed.data;
}

/** The reasons a password fails the project's rules (`length`, `characters`), with the platform's message. */
export function passwordWeakness(password: string, settings: AuthSettings) {
  const reasons: string[] = [];
  const messages: string[] = [];
  const min = Number(settings.password_min_length ?? 6);
  if (password.length < min) {
    reasons.push("length");
    messages.push(`Password should be at least ${min} characters.`);
  }
  const groups = String(settings.password_required_characters ?? "")
    .split(":")
    .filter(Boolean);
  if (groups.some((group) => ![...group].some((c) => password.includes(c)))) {
    reasons.push("characters");
    messages.push(`Password should contain at least one character of each: ${groups.join(", ")}.`);
  }
  if (settings.password_hibp_enabled === true && isLeakedPassword(password)) {
    reasons.push("pwned");
    messages.push("Password is known to be weak and easy to guess, please choose a different one.");
  }
  return reasons.length ? { reasons, message: messages.join(" ") } : undefined;
}

export function checkPassword(password: string, settings: AuthSettings): void {
  if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES) {
    throw new AuthApiError(
      422,
      "validation_failed",
      `Password cannot be longer than ${MAX_PASSWORD_BYTES} characters`,
    );
  }
  const weak = passwordWeakness(password, settings);
  if (weak)
    throw new AuthApiError(422, "weak_password", weak.message, { weak_password: { reasons: weak.reasons } });
}

export function pkceOf(body: {
  code_challenge?: string | null;
  code_challenge_method?: string | null;
}): Pkce | undefined {
  if (!body.code_challenge) return undefined;
  const method = (body.code_challenge_method ?? "s256").toLowerCase();
  if (method !== "s256" && method !== "plain") {
    throw new AuthApiError(400, "validation_failed", "code challenge method not supported");
  }
  if (body.code_challenge.length < 43 || body.code_challenge.length > 128) {
    throw new AuthApiError(
      400,
      "validation_failed",
      "code challenge has to be between 43 and 128 characters",
    );
  }
  return { codeChallenge: body.code_challenge, method };
}

const apiUrlOf = (req: Request) => `${req.protocol}://${req.get("host")}/auth/v1`;

export interface AuthToolkit {
  ctx: AppContext;
  settings(project: ProjectRuntime): Promise<AuthSettings>;
  consume(kind: string, key: string, points: number, seconds: number): Promise<void>;
  consumeMail(project: ProjectRuntime, settings: AuthSettings): () => Promise<void>;
  /** What sending an SMS needs: the config, the providers' URLs, the project's rate_limit_sms_sent. */
  smsSender(project: ProjectRuntime, settings: AuthSettings, req: Request): SmsSender;
  sessionResponse(
    project: ProjectRuntime,
    req: Request,
    user: UserRow,
    session: { sessionId: string; refreshToken: string },
    settings: AuthSettings,
    method: string,
  ): Promise<Record<string, unknown>>;
  currentUser(project: ProjectRuntime, req: Request): Promise<CurrentUser>;
  apiUrl(req: Request): string;
}

export interface CurrentUser {
  claims: Record<string, unknown>;
  user: UserRow | undefined;
  sessionId: string | null;
}

export type Handler = (
  project: ProjectRuntime,
  req: Request,
  res: Response,
  keyAuth: RequestAuth,
) => Promise<unknown>;

export type Handle = (handler: Handler, options?: { keyRequired?: boolean }) => RequestHandler;

/** The project's auth endpoints, as `@supabase/auth-js` calls them. Every call needs a valid API key. */
export function authRouter(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  const limiters = new Map<string, RateLimiterPostgres>();

  /** The OTP limit (sign-in links and codes, recovery, resend) of the caller's address. */
  const consumeOtp = (req: Request, ref: string, settings: AuthSettings) =>
    consume("otp", perIp(req, ref), Number(settings.rate_limit_otp ?? 30), RATE_WINDOW_SECONDS);

  /**
   * Counts a request against a configured limit in Postgres (shared by every Strata process). The limit is
   * read live: one limiter per kind, value and window.
   */
  async function consume(kind: string, key: string, points: number, seconds: number) {
    const keyPrefix = `auth-${kind}-${points}-${seconds}`;
    let limiter = limiters.get(keyPrefix);
    if (!limiter) {
      limiter = postgresRateLimiter(ctx.platformPool, { keyPrefix, points, seconds });
      limiters.set(keyPrefix, limiter);
    }
    await limiter.consume(key).catch((e: unknown) => {
      if (e instanceof RateLimiterRes) {
        if (kind === "email")
          throw new AuthApiError(429, "over_email_send_rate_limit", "email rate limit exceeded");
        if (kind === "sms")
          throw new AuthApiError(429, "over_sms_send_rate_limit", "SMS rate limit exceeded");
        throw new AuthApiError(429, "over_request_rate_limit", "Request rate limit reached");
      }
      throw e;
    });
  }
  const perIp = (req: Request, ref: string) => `${ref}:${req.ip ?? "unknown"}`;

  /** Access token and refresh token of a session, in the auth client's session shape. */
  async function sessionResponse(
    project: ProjectRuntime,
    req: Request,
    user: UserRow,
    session: { sessionId: string; refreshToken: string },
    settings: AuthSettings,
    method: string,
  ) {
    const iat = Math.floor(Date.now() / 1000);
    const exp = iat + Number(settings.jwt_exp);
    const assurance = await sessionAssurance(project.authPool, session.sessionId);
    let claims: Record<string, unknown> = {
      iss: apiUrlOf(req),
      sub: user.id,
      aud: user.aud,
      exp,
      iat,
      email: user.email ?? "",
      phone: user.phone ?? "",
      app_metadata: user.raw_app_meta_data,
      user_metadata: user.raw_user_meta_data,
      role: user.role,
      aal: assurance?.aal ?? "aal1",
      amr: assurance?.amr ?? [],
      session_id: session.sessionId,
      is_anonymous: user.is_anonymous,
    };
    claims = await runAccessTokenHook(project.authPool, settings, {
      user_id: user.id,
      claims,
      authentication_method: method,
    });
    const accessToken = await signProjectToken(project, claims);
    if (req.res) (req.res.locals as AuthLogLocals).authUserId = user.id;
    return {
      access_token: accessToken,
      token_type: "bearer",
      expires_in: Number(settings.jwt_exp),
      expires_at: exp,
      refresh_token: session.refreshToken,
      user: await apiUser(project.authPool, user),
    };
  }

  /** The signed-in user of a request: a valid bearer JWT of a live session (or a third-party token's claims). */
  async function currentUser(project: ProjectRuntime, req: Request): Promise<CurrentUser> {
    // /auth/v1 acts for this project's own users: a third-party provider's token is not one of theirs.
    const bearer = await bearerAuthOf(project, req, "anon", { thirdParty: false }).catch((e: unknown) => {
      // An expired token of the project is the platform's 403 bad_jwt; other refusals stay the gate's 401.
      if (e instanceof GateError && e.code === "invalid_jwt" && /JWT expired$/.test(e.message)) {
        throw new AuthApiError(403, "bad_jwt", "invalid JWT: token is expired");
      }
      throw e;
    });
    if (!bearer)
      throw new AuthApiError(401, "no_authorization", "This endpoint requires a valid Bearer token");
    const { claims } = bearer;
    if (typeof claims.sub !== "string")
      throw new AuthApiError(403, "bad_jwt", "invalid claim: missing sub claim");
    const user = await userById(project.authPool, claims.sub);
    const sessionId = typeof claims.session_id === "string" ? claims.session_id : null;
    if (sessionId) {
      if (!user || !(await sessionExists(project.authPool, sessionId))) {
        throw new AuthApiError(
          403,
          "session_not_found",
          "Session from session_id claim in JWT does not exist",
        );
      }
    }
    return { claims, user, sessionId };
  }

  const tk: AuthToolkit = {
    ctx,
    settings: (project) => authSettings(project.platformPool, project.ref),
    consume,
    consumeMail: (project, settings) => () =>
      consume("email", project.ref, Number(settings.rate_limit_email_sent ?? 2), HOUR_SECONDS),
    smsSender: (project, settings, req) => ({
      settings,
      urls: ctx.config.smsProviderUrls,
      consumeSms: () => consume("sms", project.ref, Number(settings.rate_limit_sms_sent ?? 30), HOUR_SECONDS),
      ip: req.ip,
    }),
    sessionResponse,
    currentUser,
    apiUrl: apiUrlOf,
  };

  /** Resolves the project, checks the API key and answers the handler's result (or its error) as JSON. */
  const handle: Handle =
    (handler, { keyRequired = true } = {}) =>
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        let project: ProjectRuntime;
        let keyAuth: RequestAuth = { role: "anon", claims: {} };
        if (keyRequired)
          ({ project, auth: keyAuth } = await openDataRequest(ctx, req, { credentials: "key" }));
        else project = await openProject(ctx, req);
        (res.locals as AuthLogLocals).authRef = project.ref;
        if (req.get(SBFF_HEADER)) await applySbForwardedFor(req, await tk.settings(project));
        if (isCaptchaRoute(req)) {
          await verifyCaptcha(req, await tk.settings(project), keyAuth.role, ctx.config.captchaUrls);
        }
        const result = await handler(project, req, res, keyAuth);
        if (!res.headersSent) res.status(200).json(result);
      } catch (e) {
        next(e);
      }
    };

  /** Anonymous sign-in (auth-js signInAnonymously): when enabled, within rate_limit_anonymous_users per hour. */
  async function signUpAnonymously(project: ProjectRuntime, req: Request, settings: AuthSettings) {
    if (!settings.external_anonymous_users_enabled) {
      throw new AuthApiError(422, "anonymous_provider_disabled", "Anonymous sign-ins are disabled");
    }
    await consume("anon", perIp(req, project.ref), settings.rate_limit_anonymous_users, HOUR_SECONDS);
    const data = parse(z.object({ data: metadata.nullish() }), req.body).data;
    const { user, session } = await withAdminTransaction(project.authPool, async (db) => {
      const inserted = await insertAnonymousUser(db, data ?? {});
      await beforeUserCreated(project.authPool, settings, inserted, req.ip);
      return { user: inserted, session: await startSession(db, inserted.id, "anonymous") };
    });
    await afterUserCreated(project.authPool, settings, user, req.ip);
    return sessionResponse(project, req, user, session, settings, "anonymous");
  }

  function requireEmailProvider(settings: AuthSettings, what: "signups" | "logins") {
    if (settings.external_email_enabled === false) {
      throw new AuthApiError(422, "email_provider_disabled", `Email ${what} are disabled`);
    }
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

  /** The platform's refusal of a body with both an email address and a phone number (`ending` as its routes say). */
  const emailOrPhoneOnly = (ending: string) =>
    new AuthApiError(
      400,
      "validation_failed",
      `Only an email address or phone number should be provided${ending}`,
    );

  function requirePhoneProvider(settings: AuthSettings, status: 400 | 422, message: string) {
    if (settings.external_phone_enabled !== true) {
      throw new AuthApiError(status, "phone_provider_disabled", message);
    }
  }

  const phoneExists = () =>
    new AuthApiError(422, "phone_exists", "A user with this phone number has already been registered");

  /**
   * A sign-up's answer, by email or phone: the obfuscated user for a taken address, else (after the
   * after-user-created hook) a session when sign-ups are autoconfirmed, the user otherwise.
   */
  async function answerSignUp(
    project: ProjectRuntime,
    req: Request,
    settings: AuthSettings,
    result:
      | { obfuscated: unknown }
      | { user: UserRow; created?: UserRow; session?: { sessionId: string; refreshToken: string } },
  ) {
    if ("obfuscated" in result) return result.obfuscated;
    if (result.created) await afterUserCreated(project.authPool, settings, result.created, req.ip);
    if (result.session) {
      return sessionResponse(project, req, result.user, result.session, settings, "password");
    }
    return apiUser(project.authPool, result.user);
  }

  /** Phone sign-up (auth-js signUp({phone, password})): a code by SMS unless sms_autoconfirm. */
  async function signUpWithPhone(project: ProjectRuntime, req: Request, settings: AuthSettings) {
    requirePhoneProvider(settings, 400, "Phone signups are disabled");
    const body = parse(phoneSignupBody, req.body);
    if (req.body?.code_challenge) {
      throw new AuthApiError(400, "validation_failed", "PKCE not supported for phone signups");
    }
    const phone = validatePhone(body.phone);
    const channel = channelOf(settings, body.channel);
    checkPassword(body.password, settings);
    const passwordHash = await hashPassword(body.password);
    const result = await withAdminTransaction(project.authPool, async (db) => {
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
      await sendPhoneOtp(db, tk.smsSender(project, settings, req), user, phone, "confirmation", channel);
      return { user: (await userById(db, user.id))!, created };
    });
    return answerSignUp(project, req, settings, result);
  }

  /** A code by SMS to sign in with (auth-js signInWithOtp({phone})), signing the number up when new. */
  async function phoneOtp(project: ProjectRuntime, req: Request, settings: AuthSettings) {
    const body = parse(phoneOtpBody, req.body);
    if (body.create_user === false) {
      const phone = validatePhone(body.phone);
      if (!(await userByPhone(project.authPool, phone)))
        throw new AuthApiError(422, "otp_disabled", "Signups not allowed for otp");
    }
    requirePhoneProvider(settings, 400, "Unsupported phone provider");
    const phone = validatePhone(body.phone);
    const channel = channelOf(settings, body.channel);
    const { created, messageId } = await withAdminTransaction(project.authPool, async (db) => {
      let user = await userByPhone(db, phone);
      let inserted: UserRow | undefined;
      if (!user) {
        if (settings.disable_signup)
          throw new AuthApiError(422, "signup_disabled", "Signups not allowed for this instance");
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
      const sender = tk.smsSender(project, settings, req);
      return {
        created: inserted,
        messageId: await sendPhoneOtp(db, sender, user, phone, "confirmation", channel),
      };
    });
    if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
    return messageId ? { message_id: messageId } : {};
  }

  /**
   * Verifies an SMS code (verifyOtp type sms or phone_change) as the platform: a test number's fixed code,
   * else Twilio Verify's check or the stored hash within sms_otp_exp; confirms the number or applies the
   * change, and starts an otp session.
   */
  async function verifyPhone(project: ProjectRuntime, settings: AuthSettings, req: Request) {
    const body = parse(phoneVerifyBody, req.body);
    const phone = validatePhone(body.phone);
    const token = body.token.trim();
    return withAdminTransaction(project.authPool, async (db) => {
      const column = body.type === "sms" ? "phone" : "phone_change";
      const user: UserRow | undefined = (
        await db.query(`select * from auth.users where ${column} = $1 and not is_sso_user for update`, [
          phone,
        ])
      ).rows[0];
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
      await db.query("delete from auth.one_time_tokens where user_id = $1", [user.id]);
      await upsertPhoneIdentity(db, confirmed);
      await syncProviders(db, user.id);
      const verified = (await userById(db, user.id))!;
      return { user: verified, session: await startSession(db, user.id, "otp") };
    }).then(({ user, session }) => sessionResponse(project, req, user, session, settings, "otp"));
  }

  router.use(recordAuthEvents(ctx.logs));
  // A body declared over the limit is refused before it is read, whatever its type; a chunked one stops the
  // body parsers (JSON here, the SAML form) at the same limit.
  router.use((req: Request, _res: Response, next: NextFunction) =>
    next(Number(req.headers["content-length"]) > AUTH_BODY_LIMIT ? bodyTooLarge() : undefined),
  );
  router.use(express.json({ limit: AUTH_BODY_LIMIT }));

  router.get(
    "/.well-known/jwks.json",
    handle(
      async (project, _req, res) => {
        res.set("Cache-Control", `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
        return { keys: await publishedJwks(project.platformPool, project.ref) };
      },
      { keyRequired: false },
    ),
  );

  router.get(
    "/settings",
    handle(async (project) => {
      const s = await tk.settings(project);
      const external: Record<string, boolean> = {};
      for (const [field, value] of Object.entries(s)) {
        const m = /^external_([a-z0-9]+)_enabled$/.exec(field);
        if (m && m[1] !== "anonymous") external[m[1]] = value === true;
      }
      return {
        external: {
          ...external,
          email: s.external_email_enabled !== false,
          phone: s.external_phone_enabled === true,
          anonymous_users: s.external_anonymous_users_enabled === true,
        },
        disable_signup: Boolean(s.disable_signup),
        mailer_autoconfirm: Boolean(s.mailer_autoconfirm),
        phone_autoconfirm: Boolean(s.sms_autoconfirm),
        sms_provider: String(s.sms_provider ?? ""),
        saml_enabled: Boolean(s.saml_enabled),
      };
    }),
  );

  router.post(
    "/signup",
    handle(async (project, req) => {
      const settings = await tk.settings(project);
      if (settings.disable_signup)
        throw new AuthApiError(422, "signup_disabled", "Signups not allowed for this instance");
      if (req.body?.email === undefined && req.body?.password === undefined) {
        return signUpAnonymously(project, req, settings);
      }
      if (req.body?.phone) {
        if (req.body.email) {
          throw emailOrPhoneOnly(" on signup.");
        }
        return signUpWithPhone(project, req, settings);
      }
      requireEmailProvider(settings, "signups");
      const body = parse(signupBody, req.body);
      const pkce = pkceOf(body);
      checkPassword(body.password, settings);
      const redirectTo = redirectTarget(settings, req.query.redirect_to);
      const passwordHash = await hashPassword(body.password);
      const result = await withAdminTransaction(project.authPool, async (db) => {
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
        await issueToken(db, settings, user, "confirmation", {
          apiUrl: apiUrlOf(req),
          redirectTo,
          pkce,
          send: true,
          consumeSend: tk.consumeMail(project, settings),
        });
        return { user: (await userById(db, user.id))!, created };
      });
      return answerSignUp(project, req, settings, result);
    }),
  );

  /** Sends a magic link (confirmed user) or a sign-up confirmation (new or unconfirmed user). */
  router.post(
    "/otp",
    handle(async (project, req) => {
      const settings = await tk.settings(project);
      await consumeOtp(req, project.ref, settings);
      if (req.body?.phone) {
        if (req.body.email) {
          throw emailOrPhoneOnly("");
        }
        return phoneOtp(project, req, settings);
      }
      requireEmailProvider(settings, "logins");
      const body = parse(otpBody, req.body);
      const pkce = pkceOf(body);
      const redirectTo = redirectTarget(settings, req.query.redirect_to);
      const created = await withAdminTransaction(project.authPool, async (db) => {
        let user = await userByEmail(db, body.email);
        let inserted: UserRow | undefined;
        if (!user) {
          if (body.create_user === false)
            throw new AuthApiError(422, "otp_disabled", "Signups not allowed for otp");
          if (settings.disable_signup)
            throw new AuthApiError(422, "signup_disabled", "Signups not allowed for this instance");
          user = inserted = (await insertUser(db, {
            email: body.email,
            passwordHash: null,
            confirmed: false,
            metadata: body.data ?? {},
          }))!;
          await beforeUserCreated(project.authPool, settings, inserted, req.ip);
        }
        const kind = user.email_confirmed_at ? "magic_link" : "confirmation";
        await issueToken(db, settings, user, kind, {
          apiUrl: apiUrlOf(req),
          redirectTo,
          pkce,
          send: true,
          consumeSend: tk.consumeMail(project, settings),
        });
        return inserted;
      });
      if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
      return {};
    }),
  );

  router.post(
    "/recover",
    handle(async (project, req) => {
      const settings = await tk.settings(project);
      await consumeOtp(req, project.ref, settings);
      const body = parse(recoverBody, req.body);
      const pkce = pkceOf(body);
      const redirectTo = redirectTarget(settings, req.query.redirect_to);
      await withAdminTransaction(project.authPool, async (db) => {
        const user = await userByEmail(db, body.email);
        // No mail and the same answer for an unknown address: nothing to learn about who has an account.
        if (!user) return;
        await issueToken(db, settings, user, "recovery", {
          apiUrl: apiUrlOf(req),
          redirectTo,
          pkce,
          send: true,
          consumeSend: tk.consumeMail(project, settings),
        });
      });
      return {};
    }),
  );

  router.post(
    "/resend",
    handle(async (project, req) => {
      const settings = await tk.settings(project);
      await consumeOtp(req, project.ref, settings);
      if (req.body?.type === "sms" || req.body?.type === "phone_change") {
        return resendPhone(project, req, settings);
      }
      const body = parse(resendBody, req.body);
      const pkce = pkceOf(body);
      const redirectTo = redirectTarget(settings, req.query.redirect_to);
      await withAdminTransaction(project.authPool, async (db) => {
        if (body.type === "signup") {
          const user = await userByEmail(db, body.email);
          if (!user || user.email_confirmed_at) return;
          await issueToken(db, settings, user, "confirmation", {
            apiUrl: apiUrlOf(req),
            redirectTo,
            pkce,
            send: true,
            consumeSend: tk.consumeMail(project, settings),
          });
          return;
        }
        const { rows } = await db.query("select * from auth.users where email_change = $1 for update", [
          body.email,
        ]);
        if (rows[0]) await sendEmailChange(db, req, project, settings, rows[0], redirectTo, pkce);
      });
      return {};
    }),
  );

  /** Resends a phone sign-up code (type sms) or a phone change code (type phone_change). */
  async function resendPhone(project: ProjectRuntime, req: Request, settings: AuthSettings) {
    if (req.body?.email) {
      throw emailOrPhoneOnly(".");
    }
    if (!req.body?.phone && req.body?.type === "sms")
      throw new AuthApiError(400, "validation_failed", "Type provided requires a phone number");
    const body = parse(phoneResendBody, req.body);
    requirePhoneProvider(settings, 400, "Phone logins are disabled");
    const phone = validatePhone(body.phone);
    const messageId = await withAdminTransaction(project.authPool, async (db) => {
      const sender = tk.smsSender(project, settings, req);
      if (body.type === "sms") {
        const user = await userByPhone(db, phone);
        if (!user || user.phone_confirmed_at) return "";
        return sendPhoneOtp(db, sender, user, phone, "confirmation", "sms");
      }
      // The user asked for the change: found by its pending number (or its current one, as the platform).
      const { rows } = await db.query(
        `select * from auth.users where (phone_change = $1 or phone = $1) and phone_change is not null
            and phone_change <> '' and not is_sso_user order by (phone_change = $1) desc limit 1 for update`,
        [phone],
      );
      const user: UserRow | undefined = rows[0];
      if (!user) return "";
      return sendPhoneOtp(db, sender, user, user.phone_change!, "phone_change", "sms");
    });
    return messageId ? { message_id: messageId } : {};
  }

  /** Sends the email change mail(s): to the new address, and (secure change) to the current one too. */
  async function sendEmailChange(
    db: pg.PoolClient,
    req: Request,
    project: ProjectRuntime,
    settings: AuthSettings,
    user: UserRow,
    redirectTo: string,
    pkce: Pkce | undefined,
  ) {
    const common = {
      apiUrl: apiUrlOf(req),
      redirectTo,
      pkce,
      send: true,
      consumeSend: tk.consumeMail(project, settings),
    };
    await issueToken(db, settings, user, "email_change", {
      ...common,
      to: user.email_change!,
      tokenColumn: "email_change_token_new",
    });
    if (settings.mailer_secure_email_change_enabled && user.email) {
      await issueToken(db, settings, (await userById(db, user.id))!, "email_change", {
        ...common,
        pkce: undefined,
        to: user.email,
        tokenColumn: "email_change_token_current",
      });
    } else {
      await setUser(db, user.id, { email_change_token_current: null });
    }
  }

  /** The session a verified token starts, or the redirect parameters of a PKCE flow or a half-done change. */
  async function verifyToken(
    project: ProjectRuntime,
    settings: AuthSettings,
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
        const code = await issueAuthCode(db, verified.user.id, type === "email" ? "magiclink" : type);
        if (code) return { code, user: verified.user };
      }
      return { user: verified.user, session: await startSession(db, verified.user.id, "otp") };
    });
  }

  router.get(
    "/verify",
    handle(
      async (project, req, res) => {
        const settings = await tk.settings(project);
        const target = redirectTarget(settings, req.query.redirect_to);
        const type = String(req.query.type ?? "");
        const hash = String(req.query.token ?? "");
        try {
          if (!["signup", "invite", "magiclink", "recovery", "email_change"].includes(type) || !hash) {
            throw otpExpired();
          }
          const outcome = await verifyToken(project, settings, type as VerifyType, { hash }, "link");
          if ("message" in outcome) {
            const message =
              "Confirmation link accepted. Please proceed to confirm link sent to the other email";
            return res.redirect(303, withParams(target, { message }, "fragment"));
          }
          if ("code" in outcome && outcome.code) {
            return res.redirect(303, withParams(target, { code: outcome.code }, "query"));
          }
          const s = await sessionResponse(project, req, outcome.user, outcome.session!, settings, "otp");
          return res.redirect(
            303,
            withParams(
              target,
              {
                access_token: String(s.access_token),
                expires_at: String(s.expires_at),
                expires_in: String(s.expires_in),
                refresh_token: String(s.refresh_token),
                token_type: "bearer",
                type,
              },
              "fragment",
            ),
          );
        } catch (e) {
          if (!(e instanceof AuthApiError) || e.status >= 500) throw e;
          return res.redirect(
            303,
            withParams(
              target,
              {
                error: "access_denied",
                error_code: e.errorCode,
                error_description:
                  e.errorCode === "otp_expired" ? "Email link is invalid or has expired" : e.message,
              },
              "fragment",
            ),
          );
        }
      },
      { keyRequired: false },
    ),
  );

  router.post(
    "/verify",
    handle(async (project, req) => {
      const settings = await tk.settings(project);
      await consume(
        "verify",
        perIp(req, project.ref),
        Number(settings.rate_limit_verify ?? 30),
        RATE_WINDOW_SECONDS,
      );
      if (req.body?.phone && !req.body?.email) return verifyPhone(project, settings, req);
      if (req.body?.type === "sms" || req.body?.type === "phone_change") {
        throw emailOrPhoneOnly(" on verify");
      }
      const body = parse(verifyBody, req.body);
      let token: { hash: string } | { email: string; otp: string };
      if (body.token_hash) token = { hash: body.token_hash };
      else if (body.email && body.token) token = { email: body.email, otp: body.token.trim() };
      else throw emailOrPhoneOnly(" on verify");
      const outcome = await verifyToken(project, settings, body.type, token, "api");
      if ("message" in outcome) {
        return { msg: "Confirmation link accepted. Please proceed to confirm link sent to the other email" };
      }
      return sessionResponse(project, req, outcome.user, outcome.session!, settings, "otp");
    }),
  );

  router.post(
    "/token",
    handle(async (project, req) => {
      const settings = await tk.settings(project);
      await consume(
        "token",
        perIp(req, project.ref),
        Number(settings.rate_limit_token_refresh),
        RATE_WINDOW_SECONDS,
      );
      const grant = req.query.grant_type;
      if (grant === "password") {
        let body: { password: string };
        let user: UserRow | undefined;
        if (req.body?.phone) {
          if (req.body.email) {
            throw emailOrPhoneOnly(" on login.");
          }
          requirePhoneProvider(settings, 422, "Phone logins are disabled");
          const phoneBody = parse(phonePasswordBody, req.body);
          body = phoneBody;
          user = await userByPhone(project.authPool, formatPhone(phoneBody.phone));
        } else {
          requireEmailProvider(settings, "logins");
          const emailBody = parse(credentialsBody, req.body);
          body = emailBody;
          user = await userByEmail(project.authPool, emailBody.email);
        }
        const valid = Boolean(
          user?.encrypted_password && (await verifyPassword(body.password, user.encrypted_password)),
        );
        // The password verification attempt hook hears of every attempt on an existing user.
        if (user) {
          await checkVerificationAttempt(
            project.authPool,
            settings,
            "password_verification_attempt",
            { user_id: user.id, valid },
            req.ip,
          );
        }
        if (!user || !valid) {
          throw new AuthApiError(400, "invalid_credentials", "Invalid login credentials");
        }
        if (user.banned_until && user.banned_until.getTime() > Date.now())
          throw new AuthApiError(400, "user_banned", "User is banned");
        if (req.body?.phone) {
          if (!user.phone_confirmed_at)
            throw new AuthApiError(400, "phone_not_confirmed", "Phone not confirmed");
        } else if (!user.email_confirmed_at)
          throw new AuthApiError(400, "email_not_confirmed", "Email not confirmed");
        const session = await startSession(project.authPool, user.id, "password");
        const response = await sessionResponse(project, req, user, session, settings, "password");
        const weak = passwordWeakness(body.password, settings);
        return weak ? { ...response, weak_password: weak } : response;
      }
      if (grant === "refresh_token") {
        const body = parse(refreshBody, req.body);
        const outcome = await refreshSession(project.authPool, body.refresh_token, {
          rotate: Boolean(settings.refresh_token_rotation_enabled),
          reuseIntervalSeconds: Number(settings.security_refresh_token_reuse_interval),
          timeboxSeconds: Number(settings.sessions_timebox) || 0,
          inactivitySeconds: Number(settings.sessions_inactivity_timeout) || 0,
          singlePerUser: Boolean(settings.sessions_single_per_user),
          tags: String(settings.sessions_tags ?? "")
            .split(",")
            .map((t) => t.trim())
            .filter(Boolean),
        });
        if (outcome.kind === "expired") throw new AuthApiError(400, "session_expired", outcome.message);
        if (outcome.kind === "not_found") {
          throw new AuthApiError(
            400,
            "refresh_token_not_found",
            "Invalid Refresh Token: Refresh Token Not Found",
          );
        }
        if (outcome.kind === "reused") {
          throw new AuthApiError(400, "refresh_token_already_used", "Invalid Refresh Token: Already Used");
        }
        const user = (await userById(project.authPool, outcome.userId))!;
        if (user.banned_until && user.banned_until.getTime() > Date.now())
          throw new AuthApiError(400, "user_banned", "User is banned");
        return sessionResponse(project, req, user, outcome, settings, "token_refresh");
      }
      if (grant === "pkce") {
        const body = parse(pkceBody, req.body);
        return withAdminTransaction(project.authPool, async (db) => {
          const { rows } = await db.query(
            `select *, extract(epoch from now() - auth_code_issued_at) as age
               from auth.flow_state where auth_code = $1 and auth_code_issued_at is not null for update`,
            [body.auth_code],
          );
          const flow = rows[0];
          if (!flow)
            throw new AuthApiError(
              404,
              "flow_state_not_found",
              "invalid flow state, no valid flow state found",
            );
          if (Number(flow.age) > AUTH_CODE_SECONDS) {
            throw new AuthApiError(400, "flow_state_expired", "invalid flow state, flow state has expired");
          }
          const challenge =
            flow.code_challenge_method === "plain"
              ? body.code_verifier
              : createHash("sha256").update(body.code_verifier).digest("base64url");
          if (challenge !== flow.code_challenge) {
            throw new AuthApiError(
              400,
              "bad_code_verifier",
              "code challenge does not match previously saved code verifier",
            );
          }
          await db.query("delete from auth.flow_state where id = $1", [flow.id]);
          const user = (await userById(db, flow.user_id))!;
          // The session's amr names how the flow signed in (magic link, OAuth, SAML); email codes are otp.
          const method = ["magiclink", "oauth", "sso/saml"].includes(flow.authentication_method)
            ? flow.authentication_method
            : "otp";
          const session = await startSession(db, user.id, method);
          return { user, session };
        }).then(({ user, session }) => sessionResponse(project, req, user, session, settings, "pkce"));
      }
      throw new AuthApiError(400, "unsupported_grant_type", "unsupported_grant_type");
    }),
  );

  router.get(
    "/user",
    handle(async (project, req) => {
      const { claims, user } = await currentUser(project, req);
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
    }),
  );

  router.get(
    "/reauthenticate",
    handle(async (project, req) => {
      const { user } = await currentUser(project, req);
      if (!user) throw new AuthApiError(404, "user_not_found", "User not found");
      if (!user.email && !user.phone)
        throw new AuthApiError(
          400,
          "validation_failed",
          "Reauthentication requires the user to have an email or a phone number",
        );
      const settings = await tk.settings(project);
      if (!user.email) {
        // A user with only a phone gets the nonce by SMS.
        if (!user.phone_confirmed_at)
          throw new AuthApiError(422, "phone_not_confirmed", "Please verify your phone first.");
        const messageId = await withAdminTransaction(project.authPool, (db) =>
          sendPhoneOtp(
            db,
            tk.smsSender(project, settings, req),
            user,
            user.phone!,
            "reauthentication",
            "sms",
          ),
        );
        return messageId ? { message_id: messageId } : {};
      }
      await withAdminTransaction(project.authPool, async (db) => {
        await issueToken(db, settings, user, "reauthentication", {
          apiUrl: apiUrlOf(req),
          redirectTo: String(settings.site_url),
          send: true,
          consumeSend: tk.consumeMail(project, settings),
        });
      });
      return {};
    }),
  );

  router.put(
    "/user",
    handle(async (project, req) => {
      const { user, sessionId } = await currentUser(project, req);
      if (!user) throw new AuthApiError(404, "user_not_found", "User not found");
      const body = parse(userUpdateBody, req.body);
      const settings = await tk.settings(project);
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
          throw new AuthApiError(
            422,
            "same_password",
            "New password should be different from the old password.",
          );
        }
        await checkNonce(project, settings, user, sessionId, body.nonce);
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
      if (body.email !== undefined && body.email !== user.email) {
        const taken = await userByEmail(project.authPool, body.email);
        if (taken) {
          throw new AuthApiError(
            422,
            "email_exists",
            "A user with this email address has already been registered",
          );
        }
      }
      await withAdminTransaction(project.authPool, async (db) => {
        if (body.data) await mergeUserMetadata(db, user.id, "raw_user_meta_data", body.data);
        if (passwordHash) {
          await setUser(db, user.id, { encrypted_password: passwordHash, reauthentication_token: null });
          // A new password ends every other session of the user.
          await endSessions(db, user.id, sessionId, "others");
        }
        if (body.email !== undefined && body.email !== user.email) {
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
            await sendEmailChange(db, req, project, settings, changing, redirectTo, pkce);
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
            await sendPhoneOtp(
              db,
              tk.smsSender(project, settings, req),
              current,
              newPhone,
              "phone_change",
              channel,
            );
          }
        }
      }).catch((e) => {
        if (e.code === "23505" && e.constraint === "users_phone_key") throw phoneExists();
        if (e.code === "23505")
          throw new AuthApiError(
            422,
            "email_exists",
            "A user with this email address has already been registered",
          );
        throw e;
      });
      return apiUser(project.authPool, (await userById(project.authPool, user.id))!);
    }),
  );

  /**
   * With security_update_password_require_reauthentication, a session older than 24 hours needs the code
   * of a reauthentication mail; a nonce given is always checked.
   */
  async function checkNonce(
    project: ProjectRuntime,
    settings: AuthSettings,
    user: UserRow,
    sessionId: string | null,
    nonce: string | undefined,
  ) {
    if (!settings.security_update_password_require_reauthentication) return;
    if (nonce === undefined) {
      const { rows } = await project.authPool.query(
        "select extract(epoch from now() - created_at) as age from auth.sessions where id::text = $1",
        [sessionId],
      );
      if (rows[0] && Number(rows[0].age) < REAUTH_SESSION_SECONDS) return;
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

  router.post(
    "/logout",
    handle(async (project, req, res) => {
      const { user, sessionId } = await currentUser(project, req);
      const scope = z.enum(["global", "local", "others"]).catch("global").parse(req.query.scope);
      if (user && sessionId) await endSessions(project.authPool, user.id, sessionId, scope);
      res.status(204).end();
    }),
  );

  router.use(mfaRoutes(tk, handle));
  router.use(oauthRoutes(tk, handle));
  router.use(samlRoutes(tk, handle));
  router.use(adminRoutes(tk, handle));

  router.use((_req: Request, res: Response) => {
    res.status(404).json({ code: 404, error_code: "not_found", msg: "Not found" });
  });

  router.use((caught: unknown, req: Request, res: Response, _next: NextFunction) => {
    const err = (caught as { type?: string }).type === "entity.too.large" ? bodyTooLarge() : caught;
    // A body refused before its end: the rest is not read, so the connection is not reused.
    if (!req.complete) res.setHeader("connection", "close");
    if (err instanceof AuthApiError || err instanceof GateError)
      (res.locals as AuthLogLocals).authError = {
        code: err instanceof AuthApiError ? err.errorCode : AUTH_ERROR_CODES[err.code],
        message: err.message,
      };
    if (err instanceof AuthApiError) {
      if (err.status >= 500) ctx.log.warn({ reason: (err.cause as Error | undefined)?.message }, err.message);
      res
        .status(err.status)
        .json({ code: err.status, error_code: err.errorCode, msg: err.message, ...err.extra });
    } else if (err instanceof GateError) {
      res
        .status(err.status)
        .json({ code: err.status, error_code: AUTH_ERROR_CODES[err.code], msg: err.message });
    } else if ((err as { type?: string }).type === "entity.parse.failed") {
      res
        .status(400)
        .json({ code: 400, error_code: "bad_json", msg: "Could not parse request body as JSON" });
    } else {
      ctx.log.error({ err }, "auth request failed");
      res.status(500).json({ code: 500, error_code: "unexpected_failure", msg: "Unexpected failure" });
    }
  });

  return router;
}
