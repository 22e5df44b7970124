import type { Request, Response } from "express";
import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";
import type { AuthSettings } from "./authConfig";
import type { RequestAuth } from "./dataAuth";
import type { IssueOptions, Pkce } from "./otp";
import type { SmsSender } from "./sms";
import type { UserRow } from "./store/users";

/**
 * One request to /auth/v1 as its handler sees it: what the request-context middleware put on it (the
 * project, the API key's role, the project's auth settings) and, on routes that require one, the caller.
 */
export interface AuthCall {
  readonly ctx: AppContext;
  readonly req: Request;
  readonly res: Response;
  readonly project: ProjectRuntime;
  /** What the API key makes the caller (anon on the routes that take no key). */
  readonly key: RequestAuth;
  /** The project's auth config, read for this request (a change acts on the next one). */
  readonly settings: AuthSettings;
  /** The auth API's URL as the caller reached it (`<scheme>://<host>/auth/v1`): the base of links. */
  readonly apiUrl: string;
  /** Counts one request against a bucket of the project's rate limits (429 when over). */
  consume(bucket: LimitBucket): Promise<void>;
}

/**
 * The rate limits of the auth server, by the config field that sets each: `otp` (sign-in links and codes,
 * recovery, resend), `verify`, `token` (every /token grant), `anon` (anonymous sign-ins), `passkey` (passkey
 * sign-in ceremonies) per client address; `email` and `sms` (messages sent) per project.
 */
export type LimitBucket = "otp" | "verify" | "token" | "anon" | "passkey" | "email" | "sms";

/** The signed-in user of a request: a valid bearer JWT of a live session (or a token without a user row). */
export interface CurrentUser {
  claims: Record<string, unknown>;
  user: UserRow | undefined;
  sessionId: string | null;
}

/** A session of the project's user, with its assurance level (what MFA's endpoints require). */
export interface SignedIn {
  user: UserRow;
  sessionId: string;
  aal: string;
}

export interface UserCall extends AuthCall {
  readonly caller: CurrentUser;
}

export interface SessionCall extends AuthCall {
  readonly caller: SignedIn;
}

/** What sending an SMS needs: the config, the providers' URLs, the project's rate_limit_sms_sent. */
export function smsSenderOf(call: AuthCall): SmsSender {
  return {
    settings: call.settings,
    urls: call.ctx.config.smsProviderUrls,
    consumeSms: () => call.consume("sms"),
    ip: call.req.ip,
  };
}

/** The options of a token mailed now: its link on this API, counted against the project's mail limit. */
export function mailed(call: AuthCall, redirectTo: string, pkce?: Pkce): IssueOptions {
  return {
    apiUrl: call.apiUrl,
    redirectTo,
    pkce,
    send: true,
    consumeSend: () => call.consume("email"),
  };
}
