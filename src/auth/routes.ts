import express, { Router, type NextFunction, type Request, type Response } from "express";
import type { AppContext } from "../context";
import { recordAuthEvents } from "./authLogs";
import type { AuthCall, LimitBucket, SessionCall, UserCall } from "./call";
import { AUTH_BODY_LIMIT, bodyTooLarge } from "./errors";
import * as adminLinks from "./handlers/adminLinks";
import * as adminUsers from "./handlers/adminUsers";
import * as customProviders from "./handlers/customProviders";
import * as factors from "./handlers/factors";
import { health } from "./handlers/health";
import * as identities from "./handlers/identities";
import { logout } from "./handlers/logout";
import * as oauth from "./handlers/oauth";
import * as passkeys from "./handlers/passkeys";
import { sendOtp } from "./handlers/otp";
import { reauthenticate } from "./handlers/reauthenticate";
import { recover } from "./handlers/recover";
import { resend } from "./handlers/resend";
import { acs } from "./handlers/samlAcs";
import * as samlSlo from "./handlers/samlSlo";
import { jwks, publicSettings } from "./handlers/settings";
import { signUp } from "./handlers/signup";
import * as sso from "./handlers/sso";
import { token } from "./handlers/token";
import * as user from "./handlers/user";
import * as verify from "./handlers/verify";
import { verifyCaptcha } from "./middleware/captcha";
import { currentUser, requireAdmin, signedInSession } from "./middleware/caller";
import { openCall } from "./middleware/context";
import { rateLimits } from "./middleware/limits";
import { notFound, respondWithError } from "./middleware/respond";

/**
 * /auth/v1, as `@supabase/auth-js` calls it: one route table, as the platform's auth server has (its
 * api.go). Each route names its middleware, run in this order before its handler:
 *   1. `access`: the request context (middleware/context.ts: the project, the API key unless `public`, the
 *      project's auth settings), then who may call: `key` any API key of the project, `user` a bearer JWT
 *      of its user, `session` a live session of one, `admin` the service role (middleware/caller.ts);
 *   2. `captcha`: the project's CAPTCHA check (middleware/captcha.ts);
 *   3. `limit`: the rate-limit bucket the request counts against (middleware/limits.ts); the mail, SMS and
 *      anonymous sign-in buckets are counted by the handlers, where a message is sent or a user made;
 *   4. `body`: every body is read through AUTH_BODY_LIMIT (refused with 413 before routing, as the
 *      platform's reader wraps its whole router) as JSON, and with `form` also as a urlencoded form.
 * A handler answers its result as JSON (or answers itself: redirects, 204, XML); errors are answered in
 * the auth server's shape by middleware/respond.ts.
 */

type Method = "get" | "post" | "put" | "patch" | "delete";
type Handler<C> = (call: C) => Promise<unknown>;

interface RouteSpec {
  method: Method;
  path: string;
  captcha?: true;
  limit?: LimitBucket;
  body?: "form";
}

export type AuthRoute = RouteSpec &
  (
    | { access: "public" | "key" | "admin"; handler: Handler<AuthCall> }
    | { access: "user"; handler: Handler<UserCall> }
    | { access: "session"; handler: Handler<SessionCall> }
  );

export const AUTH_ROUTES: readonly AuthRoute[] = [
  { method: "get", path: "/.well-known/jwks.json", access: "public", handler: jwks },
  { method: "get", path: "/settings", access: "key", handler: publicSettings },
  { method: "get", path: "/health", access: "key", handler: health },

  { method: "post", path: "/signup", access: "key", captcha: true, handler: signUp },
  { method: "post", path: "/otp", access: "key", captcha: true, limit: "otp", handler: sendOtp },
  { method: "post", path: "/recover", access: "key", captcha: true, limit: "otp", handler: recover },
  { method: "post", path: "/resend", access: "key", captcha: true, limit: "otp", handler: resend },
  { method: "get", path: "/verify", access: "public", handler: verify.verifyLink },
  { method: "post", path: "/verify", access: "key", limit: "verify", handler: verify.verifyOtp },
  { method: "post", path: "/token", access: "key", captcha: true, limit: "token", handler: token },

  { method: "get", path: "/user", access: "user", handler: user.getUser },
  { method: "put", path: "/user", access: "user", handler: user.updateUser },
  { method: "get", path: "/reauthenticate", access: "user", handler: reauthenticate },
  { method: "post", path: "/logout", access: "user", handler: logout },
  { method: "get", path: "/user/identities/authorize", access: "user", handler: identities.linkAuthorize },
  { method: "delete", path: "/user/identities/:id", access: "user", handler: identities.unlink },

  { method: "post", path: "/factors", access: "session", handler: factors.enroll },
  { method: "post", path: "/factors/:id/challenge", access: "session", handler: factors.challenge },
  { method: "post", path: "/factors/:id/verify", access: "session", handler: factors.verify },
  { method: "delete", path: "/factors/:id", access: "session", handler: factors.unenroll },

  {
    method: "post",
    path: "/passkeys/registration/options",
    access: "session",
    handler: passkeys.registrationOptions,
  },
  {
    method: "post",
    path: "/passkeys/registration/verify",
    access: "session",
    handler: passkeys.registrationVerify,
  },
  {
    method: "post",
    path: "/passkeys/authentication/options",
    access: "key",
    captcha: true,
    limit: "passkey",
    handler: passkeys.authenticationOptions,
  },
  {
    method: "post",
    path: "/passkeys/authentication/verify",
    access: "key",
    handler: passkeys.authenticationVerify,
  },
  { method: "get", path: "/passkeys", access: "session", handler: passkeys.list },
  { method: "patch", path: "/passkeys/:id", access: "session", handler: passkeys.rename },
  { method: "delete", path: "/passkeys/:id", access: "session", handler: passkeys.remove },

  { method: "get", path: "/authorize", access: "public", handler: oauth.authorize },
  { method: "get", path: "/callback", access: "public", handler: oauth.callback },
  { method: "post", path: "/callback", access: "public", body: "form", handler: oauth.callback },

  { method: "post", path: "/sso", access: "key", captcha: true, handler: sso.startSso },
  { method: "get", path: "/sso/saml/metadata", access: "public", handler: sso.metadata },
  { method: "post", path: "/sso/saml/acs", access: "public", body: "form", handler: acs },
  { method: "post", path: "/sso/saml/logout", access: "session", handler: samlSlo.startLogout },
  { method: "get", path: "/sso/saml/slo", access: "public", handler: samlSlo.slo },
  { method: "post", path: "/sso/saml/slo", access: "public", body: "form", handler: samlSlo.slo },

  { method: "get", path: "/admin/users", access: "admin", handler: adminUsers.list },
  { method: "post", path: "/admin/users", access: "admin", handler: adminUsers.create },
  { method: "get", path: "/admin/users/:id", access: "admin", handler: adminUsers.get },
  { method: "put", path: "/admin/users/:id", access: "admin", handler: adminUsers.update },
  { method: "delete", path: "/admin/users/:id", access: "admin", handler: adminUsers.remove },
  { method: "get", path: "/admin/users/:id/factors", access: "admin", handler: adminUsers.listFactors },
  {
    method: "delete",
    path: "/admin/users/:id/factors/:factorId",
    access: "admin",
    handler: adminUsers.removeFactor,
  },
  { method: "get", path: "/admin/custom-providers", access: "admin", handler: customProviders.list },
  { method: "post", path: "/admin/custom-providers", access: "admin", handler: customProviders.create },
  {
    method: "get",
    path: "/admin/custom-providers/:identifier",
    access: "admin",
    handler: customProviders.get,
  },
  {
    method: "put",
    path: "/admin/custom-providers/:identifier",
    access: "admin",
    handler: customProviders.update,
  },
  {
    method: "delete",
    path: "/admin/custom-providers/:identifier",
    access: "admin",
    handler: customProviders.remove,
  },
  { method: "get", path: "/admin/users/:id/passkeys", access: "admin", handler: adminUsers.listPasskeys },
  {
    method: "delete",
    path: "/admin/users/:id/passkeys/:passkeyId",
    access: "admin",
    handler: adminUsers.removePasskey,
  },
  { method: "post", path: "/invite", access: "admin", handler: adminLinks.invite },
  { method: "post", path: "/admin/generate_link", access: "admin", handler: adminLinks.generateLink },
];

/** Runs a route's caller requirement and its handler. */
async function runHandler(route: AuthRoute, call: AuthCall): Promise<unknown> {
  switch (route.access) {
    case "user":
      return route.handler({ ...call, caller: await currentUser(call) });
    case "session":
      return route.handler({ ...call, caller: await signedInSession(call) });
    case "admin":
      await requireAdmin(call);
      return route.handler(call);
    default:
      return route.handler(call);
  }
}

/** The project's auth endpoints: the table mounted behind the log, body limit and JSON parser. */
export function authRouter(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  const limits = rateLimits(ctx.platformPool);
  router.use(recordAuthEvents(ctx.logs));
  // A body declared over the limit is refused before it is read, whatever its type; a chunked one stops the
  // body parsers at the same limit.
  router.use((req: Request, _res: Response, next: NextFunction) =>
    next(Number(req.headers["content-length"]) > AUTH_BODY_LIMIT ? bodyTooLarge() : undefined),
  );
  router.use(express.json({ limit: AUTH_BODY_LIMIT }));
  const form = express.urlencoded({ extended: false, limit: AUTH_BODY_LIMIT });
  for (const route of AUTH_ROUTES) {
    router[route.method](
      route.path,
      ...(route.body === "form" ? [form] : []),
      async (req: Request, res: Response, next: NextFunction) => {
        try {
          const call = await openCall(ctx, limits, req, res, { apiKey: route.access !== "public" });
          if (route.captcha) await verifyCaptcha(call);
          if (route.limit) await call.consume(route.limit);
          const result = await runHandler(route, call);
          if (!res.headersSent) res.status(200).json(result);
        } catch (e) {
          next(e);
        }
      },
    );
  }
  router.use(notFound);
  router.use(respondWithError(ctx));
  return router;
}
