import type { NextFunction, Request, Response } from "express";
import type { LogRecorder } from "../logs/recorder";
import type { AuthApiError } from "./errors";

/**
 * The project's `auth_logs` source: one event per request the auth service handled for a project, shaped
 * like the auth server's own JSON log lines (`level`, `msg`, `action`, `status`, `path`, `method`,
 * `error_code`, `user_id`). Never a body, a query string, a token or an address' secret: only the path, the
 * grant type and the refusal's code and message.
 */

/** Set by the router on `res.locals` as the request goes. */
export interface AuthLogLocals {
  authRef?: string;
  authUserId?: string;
  authError?: { code: string; message: string };
}

/**
 * Sign-ins that are not a /token grant: an OAuth provider's and an SSO identity provider's callbacks, and a
 * passkey's assertion. (A verified link is `user_verified`.)
 */
const SIGN_IN_PATHS = new Set(["/callback", "/sso/saml/acs", "/passkeys/authentication/verify"]);

/**
 * A refusal the handler answered as a redirect (the browser's next page carries the error), so that
 * auth_logs records it as a failure although its status is not one.
 */
export function noteRefusal(res: Response, e: AuthApiError): void {
  (res.locals as AuthLogLocals).authError = { code: e.errorCode, message: e.message };
}

function actionOf(method: string, path: string, grantType: unknown, ok: boolean): string {
  if (path === "/token") {
    if (grantType === "refresh_token") return ok ? "token_refreshed" : "token_refresh_failed";
    return ok ? "login" : "login_failed";
  }
  if (SIGN_IN_PATHS.has(path)) return ok ? "login" : "login_failed";
  if (/^\/factors\/[^/]+\/verify$/.test(path))
    return ok ? "verification_attempted" : "mfa_verification_failed";
  if (path === "/passkeys/registration/verify") return ok ? "passkey_created" : "passkey_registration_failed";
  if (path.startsWith("/passkeys/") && method === "PATCH") return "passkey_updated";
  if (path.startsWith("/passkeys/") && method === "DELETE") return "passkey_deleted";
  if (path === "/signup") return ok ? "user_signedup" : "user_signup_failed";
  if (path === "/logout" || path === "/sso/saml/logout" || path === "/sso/saml/slo") return "logout";
  if (path === "/recover") return "user_recovery_requested";
  if (path === "/otp" || path === "/magiclink") return "user_otp_requested";
  if (path === "/verify") return ok ? "user_verified" : "user_verification_failed";
  if (path === "/user" && method === "PUT") return "user_modified";
  if (path.startsWith("/factors")) return "mfa";
  if (path.startsWith("/admin/")) return "admin";
  if (path.startsWith("/sso")) return "sso";
  return "request";
}

/** Middleware of the auth router: records the request once it is answered, if a project handled it. */
export function recordAuthEvents(logs: LogRecorder | undefined) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (logs) {
      const path = req.path;
      res.on("finish", () => {
        const locals = res.locals as AuthLogLocals;
        if (!locals.authRef) return;
        const status = res.statusCode;
        const ok = status < 400 && !locals.authError;
        const action = actionOf(req.method, path, req.query.grant_type, ok);
        const event = {
          level: status >= 500 ? "error" : ok ? "info" : "warning",
          msg: locals.authError?.message ?? "request completed",
          action,
          method: req.method,
          path,
          status,
          ...(path === "/token" && typeof req.query.grant_type === "string"
            ? { grant_type: req.query.grant_type }
            : {}),
          ...(locals.authError ? { error_code: locals.authError.code } : {}),
          ...(locals.authUserId ? { user_id: locals.authUserId } : {}),
        };
        logs.record({
          ref: locals.authRef,
          source: "auth_logs",
          message: JSON.stringify(event),
          metadata: event,
        });
      });
    }
    next();
  };
}
