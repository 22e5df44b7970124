import pg from "pg";
import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { AppContext } from "../context";
import { JobRefused } from "../jobs/refused";
import { sha256 } from "../platform/ids";
import { SESSION_PREFIX, sessionCaller } from "./account/sessions";
import type { Principal } from "./principal";

export { isUserThemself, type Principal } from "./principal";

/** A Management API error: answered as `{"message": ...}` with its status, and `fields` beside the message. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly fields: Record<string, string | number> = {},
  ) {
    super(message);
  }
}

/** `row`, or a 404 naming what was not found (e.g. `found(await getApiKey(...), "API key", id)`). */
export function found<T>(row: T | null | undefined, what: string, id: string): T {
  if (row === null || row === undefined) throw new HttpError(404, `${what} ${id} not found`);
  return row;
}

/** A member's role, and the project or organization whose membership was checked for this request. */
export interface Membership {
  role: string;
  project?: string;
  organization?: string;
}

/** A permission requirement from the spec's P column: one permission, or an `and`/`or` pair. */
export type PermissionRule = string | { and: string[] } | { or: string[] };

/** An endpoint's requirements: permission (P) and OAuth scope (S). */
export interface Access {
  /**
   * Open to callers without a token (signing in, accepting an invitation): the family's router is mounted
   * before `requirePrincipal`, and the handler decides who the caller is.
   */
  anyone?: true;
  permission?: PermissionRule;
  scope?: string;
  /**
   * The operation acts on the whole PostgreSQL cluster (its files, slots, processes), which every project on it
   * shares: only installation administrators, besides the permission and role above.
   */
  installationAdmin?: true;
}

declare module "express-serve-static-core" {
  interface Request {
    /** Set by `identifyCaller` when the bearer token is valid. */
    principal?: Principal;
    /** Why the request carries no valid token (answered with 401 by `requirePrincipal`). */
    authFailure?: string;
    /** The caller's role in the organization of the addressed project or organization, and what was checked. */
    membership?: Membership;
  }
}

/** The caller an access token stands for (personal, fine-grained or OAuth), while it is valid. */
async function tokenCaller(db: pg.Pool, token: string): Promise<Principal | undefined> {
  const { rows } = await db.query(
    `update platform.access_tokens t set last_used_at = now() from platform.users u
      where t.token_hash = $1 and (t.expires_at is null or t.expires_at > now()) and u.id = t.user_id
      returning t.id, t.user_id, t.permissions, t.scopes, t.oauth_app_id, t.organization_id,
                u.is_installation_admin`,
    [sha256(token)],
  );
  if (rows.length === 0) return undefined;
  return {
    userId: rows[0].user_id,
    tokenId: rows[0].id,
    via: "token",
    permissions: rows[0].permissions,
    scopes: rows[0].scopes,
    oauthAppId: rows[0].oauth_app_id,
    organizationId: rows[0].organization_id,
    installationAdmin:
      rows[0].is_installation_admin && rows[0].scopes === null && rows[0].oauth_app_id === null,
  };
}

/**
 * The credential a request carries: `Authorization: Bearer <token>`, an access token or a session token (told
 * apart by its prefix). No cookie counts: pages of the projects (edge functions, public objects) are served on
 * this origin, and a cookie would let them act as whoever visits them.
 */
function credentialOf(req: Request): { token: string; session: boolean } | string {
  const bearer = /^bearer\s+(.+)$/i.exec(req.headers.authorization ?? "")?.[1]?.trim();
  if (!bearer) return "Unauthorized: missing access token";
  return { token: bearer, session: bearer.startsWith(SESSION_PREFIX) };
}

/**
 * Resolves the request's credential against the stored token and session hashes. It never answers by itself:
 * the rate limiter runs next (unauthenticated callers are counted by IP) and `requirePrincipal` refuses.
 */
export function identifyCaller(ctx: AppContext): RequestHandler {
  return async (req, _res, next) => {
    try {
      const credential = credentialOf(req);
      if (typeof credential === "string") {
        req.authFailure = credential;
        return next();
      }
      req.principal = credential.session
        ? await sessionCaller(ctx.platformPool, credential.token)
        : await tokenCaller(ctx.platformPool, credential.token);
      if (!req.principal)
        req.authFailure = `Unauthorized: invalid ${credential.session ? "or ended session" : "access token"}`;
      next();
    } catch (e) {
      next(e);
    }
  };
}

/** Answers 401 when `identifyCaller` found no valid token. */
export const requirePrincipal: RequestHandler = (req, _res, next) => {
  next(req.principal ? undefined : new HttpError(401, req.authFailure ?? "Unauthorized"));
};

function permits(has: (permission: string) => boolean, rule: PermissionRule): boolean {
  if (typeof rule === "string") return has(rule);
  if ("and" in rule) return rule.and.every(has);
  return rule.or.some(has);
}

function describe(rule: PermissionRule): string {
  if (typeof rule === "string") return rule;
  return "and" in rule ? rule.and.join(" and ") : rule.or.join(" or ");
}

/** Permissions an organization role lacks: Read-only only reads; Developers do not administer. */
const DEVELOPER_DENIED = new Set([
  "organization_admin_write",
  "organization_projects_create",
  "project_admin_write",
]);

export function roleGrants(role: string, permission: string): boolean {
  if (role === "Owner" || role === "Administrator") return true;
  if (role === "Developer") return !DEVELOPER_DENIED.has(permission);
  return permission.endsWith("_read");
}

/** Checks the caller's role in the addressed organization against a permission rule. */
export function checkRole(role: string, rule: PermissionRule): void {
  if (!permits((p) => roleGrants(role, p), rule))
    throw new HttpError(403, `Forbidden: the organization role ${role} does not allow this`);
}

/**
 * Checks the caller's token against an endpoint's permission and scope, and, when the request addresses a
 * project or organization, the caller's role there (set by `resolveMembership`).
 */
export function checkAccess(principal: Principal, access: Access, membership?: { role: string }): void {
  if (access.anyone) return;
  if (principal.scopes) {
    if (!access.scope || !principal.scopes.includes(access.scope)) {
      throw new HttpError(
        403,
        `Forbidden: this endpoint needs the OAuth scope ${access.scope ?? "(none available)"}`,
      );
    }
  }
  const granted = principal.permissions;
  if (granted && access.permission && !permits((p) => granted.includes(p), access.permission)) {
    throw new HttpError(403, `Forbidden: this token lacks the permission ${describe(access.permission)}`);
  }
  if (membership && access.permission) checkRole(membership.role, access.permission);
  if (access.installationAdmin) requireInstallationAdmin(principal, "This operation");
}

/**
 * Refuses (403) a caller who is not an installation administrator: `what` acts on the whole PostgreSQL cluster,
 * and every cluster Strata serves can hold other projects, so it is the installation's, not one project's.
 */
export function requireInstallationAdmin(principal: Principal, what: string): void {
  if (!principal.installationAdmin)
    throw new HttpError(
      403,
      `Forbidden: ${what} acts on the whole PostgreSQL cluster, which this project shares with the ` +
        "installation's other projects; only the installation's administrators may do it",
    );
}

/** Reading keys is what the spec names for secrets: `secrets:read` for OAuth tokens, `api_gateway_keys_read` otherwise. */
const SECRET_READ: Access = { permission: "api_gateway_keys_read", scope: "secrets:read" };

/**
 * Whether the caller may see a secret inside an answer whose route needs only a read permission (the JWT
 * secret in the REST config, a branch's credentials): the secret is left out for a caller who could not
 * read the project's keys.
 */
export function mayReadSecrets(req: { principal?: Principal; membership?: { role: string } }): boolean {
  try {
    checkAccess(req.principal!, SECRET_READ, req.membership);
    return true;
  } catch {
    return false;
  }
}

/** Maps every error to `{"message": ...}`; unexpected ones become 500 without internals. */
export function managementErrorHandler(ctx: AppContext) {
  return (err: unknown, _req: Request, res: Response, _next: NextFunction): void => {
    if (err instanceof HttpError || err instanceof JobRefused) {
      res.status(err.status).json({ message: err.message, ...(err instanceof HttpError ? err.fields : {}) });
      return;
    }
    const status = (err as { status?: number; statusCode?: number })?.status ?? (err as any)?.statusCode;
    if (typeof status === "number" && status >= 400 && status < 500) {
      // body-parser errors: malformed JSON, body too large
      res.status(status).json({ message: `Bad request: ${(err as Error).message}` });
      return;
    }
    if (err instanceof pg.DatabaseError && err.code?.startsWith("22")) {
      // A data exception (a NUL byte, an out-of-range or malformed value) comes from the caller's input.
      res.status(400).json({ message: `Invalid input: ${err.message}` });
      return;
    }
    ctx.log.error({ err }, "management request failed");
    res.status(500).json({ message: "Internal server error" });
  };
}
