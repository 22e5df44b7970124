import express, { Router, type NextFunction, type Request, type Response } from "express";
import { RateLimiterRes, type RateLimiterPostgres } from "rate-limiter-flexible";
import { z } from "zod";
import type { AppContext } from "../context";
import { postgresRateLimiter } from "../http/rateLimiter";
import { bearerAuthOf, GateError, openDataRequest, openProject, type GateErrorCode } from "../http/gate";
import type { ProjectRuntime } from "../projects/runtime";
import { authSettings, type AuthSettings } from "./authConfig";
import { signProjectToken } from "./issueToken";
import { hashPassword, verifyPassword } from "./passwords";
import { publishedJwks } from "./signingKeys";
import {
  endSessions,
  insertAnonymousUser,
  insertUser,
  refreshSession,
  sessionExists,
  startSession,
  toUser,
  updateUser,
  userByEmail,
  userById,
  type UserRow,
} from "./users";

/** An error in the auth server's shape: `{code, error_code, msg}`. */
class AuthApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: string,
    message: string,
  ) {
    super(message);
  }
}

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
/** The windows the auth server counts in: token requests per 5 minutes, anonymous sign-ins per hour (per IP). */
const RATE_WINDOW_SECONDS = 300;
const ANONYMOUS_WINDOW_SECONDS = 3600;

const email = z.string().trim().toLowerCase().email();
const credentialsBody = z.object({ email, password: z.string() });
const signupBody = credentialsBody.extend({ data: z.record(z.string(), z.unknown()).optional() });
const refreshBody = z.object({ refresh_token: z.string().min(1) });
const userUpdateBody = z.object({
  email: email.optional(),
  password: z.string().optional(),
  data: z.record(z.string(), z.unknown()).optional(),
});

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new AuthApiError(400, "validation_failed", `${issue.path.join(".") || "body"}: ${issue.message}`);
  }
  return parsed.data;
}

function checkPassword(password: string, settings: AuthSettings): void {
  if (password.length < settings.password_min_length) {
    throw new AuthApiError(
      422,
      "weak_password",
      `Password should be at least ${settings.password_min_length} characters.`,
    );
  }
}

/** Access token and refresh token of a session, in the auth client's session shape. */
async function sessionResponse(
  project: ProjectRuntime,
  req: Request,
  user: UserRow,
  session: { sessionId: string; refreshToken: string },
  settings: AuthSettings,
) {
  const iat = Math.floor(Date.now() / 1000);
  const exp = iat + settings.jwt_exp;
  const accessToken = await signProjectToken(project, {
    iss: `${req.protocol}://${req.get("host")}/auth/v1`,
    sub: user.id,
    aud: user.aud,
    exp,
    iat,
    email: user.email ?? "",
    phone: "",
    app_metadata: user.raw_app_meta_data,
    user_metadata: user.raw_user_meta_data,
    role: user.role,
    aal: "aal1",
    amr: [{ method: user.is_anonymous ? "anonymous" : "password", timestamp: iat }],
    session_id: session.sessionId,
    is_anonymous: user.is_anonymous,
  });
  return {
    access_token: accessToken,
    token_type: "bearer",
    expires_in: settings.jwt_exp,
    expires_at: exp,
    refresh_token: session.refreshToken,
    user: toUser(user),
  };
}

/** The signed-in user of a request: a valid bearer JWT of a live session (or a third-party token's claims). */
async function currentUser(project: ProjectRuntime, req: Request) {
  // /auth/v1 acts for this project's own users: a third-party provider's token is not one of theirs.
  const bearer = await bearerAuthOf(project, req, "anon", { thirdParty: false });
  if (!bearer) throw new AuthApiError(401, "no_authorization", "This endpoint requires a valid Bearer token");
  const { claims } = bearer;
  if (typeof claims.sub !== "string")
    throw new AuthApiError(403, "bad_jwt", "invalid claim: missing sub claim");
  const user = await userById(project.adminPool, claims.sub);
  if (typeof claims.session_id === "string") {
    if (!user || !(await sessionExists(project.adminPool, claims.session_id))) {
      throw new AuthApiError(403, "session_not_found", "Session from session_id claim in JWT does not exist");
    }
  }
  return { claims, user };
}

/** The project's auth endpoints, as `@supabase/auth-js` calls them. Every call needs a valid API key. */
export function authRouter(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  const limiters = new Map<string, RateLimiterPostgres>();

  /** Anonymous sign-in (auth-js signInAnonymously): when enabled, within rate_limit_anonymous_users per hour. */
  async function signUpAnonymously(project: ProjectRuntime, req: Request, settings: AuthSettings) {
    if (!settings.external_anonymous_users_enabled) {
      throw new AuthApiError(422, "anonymous_provider_disabled", "Anonymous sign-ins are disabled");
    }
    await consume("anon", project.ref, settings.rate_limit_anonymous_users, ANONYMOUS_WINDOW_SECONDS, req);
    const data = parse(z.object({ data: z.record(z.string(), z.unknown()).optional() }), req.body).data;
    const user = await insertAnonymousUser(project.adminPool, data ?? {});
    return sessionResponse(project, req, user, await startSession(project.adminPool, user.id), settings);
  }

  /**
   * Counts a request against a configured limit, per project and IP, in Postgres (shared by every Strata
   * process). The limit is read live: one limiter per kind, value and window.
   */
  async function consume(kind: string, ref: string, points: number, seconds: number, req: Request) {
    const keyPrefix = `auth-${kind}-${points}-${seconds}`;
    let limiter = limiters.get(keyPrefix);
    if (!limiter) {
      limiter = postgresRateLimiter(ctx.platformPool, { keyPrefix, points, seconds });
      limiters.set(keyPrefix, limiter);
    }
    await limiter.consume(`${ref}:${req.ip ?? "unknown"}`).catch((e: unknown) => {
      if (e instanceof RateLimiterRes)
        throw new AuthApiError(429, "over_request_rate_limit", "Request rate limit reached");
      throw e;
    });
  }

  type Handler = (project: ProjectRuntime, req: Request, res: Response) => Promise<unknown>;
  /** Resolves the project, checks the API key and answers the handler's result (or its error) as JSON. */
  const handle =
    (handler: Handler, { keyRequired = true } = {}) =>
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        const project = keyRequired
          ? (await openDataRequest(ctx, req, { credentials: "key" })).project
          : await openProject(ctx, req);
        const result = await handler(project, req, res);
        if (!res.headersSent) res.status(200).json(result);
      } catch (e) {
        next(e);
      }
    };

  router.use(express.json({ limit: "1mb" }));

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
      const s = await authSettings(project.platformPool, project.ref);
      return {
        external: { email: s.external_email_enabled !== false, phone: false, anonymous_users: false },
        disable_signup: s.disable_signup,
        mailer_autoconfirm: s.mailer_autoconfirm,
        phone_autoconfirm: false,
        sms_provider: "",
        saml_enabled: Boolean(s.saml_enabled),
      };
    }),
  );

  router.post(
    "/signup",
    handle(async (project, req) => {
      const settings = await authSettings(project.platformPool, project.ref);
      if (settings.disable_signup)
        throw new AuthApiError(422, "signup_disabled", "Signups not allowed for this instance");
      if (req.body?.email === undefined && req.body?.password === undefined) {
        return signUpAnonymously(project, req, settings);
      }
      const body = parse(signupBody, req.body);
      checkPassword(body.password, settings);
      const user = await insertUser(project.adminPool, {
        email: body.email,
        passwordHash: await hashPassword(body.password),
        confirmed: settings.mailer_autoconfirm,
        metadata: body.data ?? {},
      });
      if (!user) throw new AuthApiError(422, "user_already_exists", "User already registered");
      if (!settings.mailer_autoconfirm) return toUser(user);
      const session = await startSession(project.adminPool, user.id);
      return sessionResponse(project, req, (await userById(project.adminPool, user.id))!, session, settings);
    }),
  );

  router.post(
    "/token",
    handle(async (project, req) => {
      const settings = await authSettings(project.platformPool, project.ref);
      await consume("token", project.ref, settings.rate_limit_token_refresh, RATE_WINDOW_SECONDS, req);
      const grant = req.query.grant_type;
      if (grant === "password") {
        const body = parse(credentialsBody, req.body);
        const user = await userByEmail(project.adminPool, body.email);
        if (!user?.encrypted_password || !(await verifyPassword(body.password, user.encrypted_password))) {
          throw new AuthApiError(400, "invalid_credentials", "Invalid login credentials");
        }
        if (!user.email_confirmed_at)
          throw new AuthApiError(400, "email_not_confirmed", "Email not confirmed");
        const session = await startSession(project.adminPool, user.id);
        return sessionResponse(project, req, user, session, settings);
      }
      if (grant === "refresh_token") {
        const body = parse(refreshBody, req.body);
        const outcome = await refreshSession(project.adminPool, body.refresh_token, {
          rotate: settings.refresh_token_rotation_enabled,
          reuseIntervalSeconds: settings.security_refresh_token_reuse_interval,
        });
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
        const user = (await userById(project.adminPool, outcome.userId))!;
        return sessionResponse(project, req, user, outcome, settings);
      }
      throw new AuthApiError(400, "unsupported_grant_type", "unsupported_grant_type");
    }),
  );

  router.get(
    "/user",
    handle(async (project, req) => {
      const { claims, user } = await currentUser(project, req);
      if (user) return toUser(user);
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

  router.put(
    "/user",
    handle(async (project, req) => {
      const { user } = await currentUser(project, req);
      if (!user) throw new AuthApiError(404, "user_not_found", "User not found");
      const body = parse(userUpdateBody, req.body);
      const settings = await authSettings(project.platformPool, project.ref);
      if (body.password !== undefined) checkPassword(body.password, settings);
      const updated = await updateUser(project.adminPool, user.id, {
        email: body.email,
        passwordHash: body.password === undefined ? undefined : await hashPassword(body.password),
        metadata: body.data,
      }).catch((e) => {
        if (e.code === "23505")
          throw new AuthApiError(
            422,
            "email_exists",
            "A user with this email address has already been registered",
          );
        throw e;
      });
      return toUser(updated!);
    }),
  );

  router.post(
    "/logout",
    handle(async (project, req, res) => {
      const { claims, user } = await currentUser(project, req);
      const scope = z.enum(["global", "local", "others"]).catch("global").parse(req.query.scope);
      if (user && typeof claims.session_id === "string") {
        await endSessions(project.adminPool, user.id, claims.session_id, scope);
      }
      res.status(204).end();
    }),
  );

  router.use((_req: Request, res: Response) => {
    res.status(404).json({ code: 404, error_code: "not_found", msg: "Not found" });
  });

  router.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (err instanceof AuthApiError) {
      res.status(err.status).json({ code: err.status, error_code: err.errorCode, msg: err.message });
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
