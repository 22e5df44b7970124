import type { NextFunction, Request, Response } from "express";
import type { AppContext } from "../../context";
import { GateError, type GateErrorCode } from "../../http/gate";
import type { AuthLogLocals } from "../authLogs";
import { AuthApiError, bodyTooLarge } from "../errors";

/** The auth server's `error_code` for each refusal of the data gate. */
const AUTH_ERROR_CODES: Record<GateErrorCode, string> = {
  no_api_key: "invalid_api_key",
  invalid_api_key: "invalid_api_key",
  invalid_jwt: "bad_jwt",
  project_not_found: "not_found",
  project_paused: "project_paused",
  project_not_ready: "project_not_ready",
};

/** A path the table has no route for. */
export function notFound(_req: Request, res: Response): void {
  res.status(404).json({ code: 404, error_code: "not_found", msg: "Not found" });
}

/** Every error of /auth/v1 in the auth server's shape `{code, error_code, msg}`, recorded for auth_logs. */
export function respondWithError(ctx: AppContext) {
  return (caught: unknown, req: Request, res: Response, _next: NextFunction): void => {
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
  };
}
