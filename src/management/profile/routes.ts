import { Router, type Request } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError, isUserThemself } from "../http";
import { userProfile } from "../organizations/store";
import { PERMISSIONS } from "../permissions";
import { routeTable } from "../route";
import {
  createAccessToken,
  deleteAccessToken,
  listAccessTokens,
  TokenError,
  type AccessTokenRow,
} from "../tokens";

const profile = z.object({
  authsvc_id: z.string(),
  /** The product's name for `authsvc_id`. */
  gotrue_id: z.string(),
  primary_email: z.string(),
  username: z.string(),
});

const accessToken = z.object({
  id: z.string(),
  name: z.string(),
  /** The token's first characters. */
  token_alias: z.string(),
  /** null: a personal token, with all of the user's privileges. */
  permissions: z.array(z.string()).nullable(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
});

const createTokenBody = z
  .object({
    name: z.string().trim().min(1).max(256),
    /** Makes a fine-grained token with only these permissions. */
    permissions: z.array(z.enum(PERMISSIONS)).min(1).max(PERMISSIONS.length).optional(),
    expires_at: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();

const tokenOut = (t: AccessTokenRow) => ({
  id: t.id,
  name: t.name,
  token_alias: t.token_prefix,
  permissions: t.permissions,
  created_at: t.created_at.toISOString(),
  expires_at: t.expires_at?.toISOString() ?? null,
  last_used_at: t.last_used_at?.toISOString() ?? null,
});

/** Only the user themself (a session or a personal access token) manages their tokens, not a token made for a tool. */
function tokenOwner(req: Request): string {
  if (!isUserThemself(req.principal!))
    throw new HttpError(
      403,
      "Forbidden: access tokens are managed with a session or a personal access token",
    );
  return req.principal!.userId;
}

/** The caller's own profile, and their personal access tokens (Strata's own endpoints under /v1/profile). */
export function profileRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const db = ctx.platformPool;
  routes.get(
    "/v1/profile",
    "Gets the profile of the calling user (the token's or the session's)",
    { access: {}, status: 200, response: profile },
    async ({ req }) => {
      const user = await userProfile(db, req.principal!.userId);
      return { authsvc_id: user.id, gotrue_id: user.id, primary_email: user.email, username: user.username };
    },
  );

  routes.get(
    "/v1/profile/access-tokens",
    "Lists the calling user's personal and fine-grained access tokens (never the tokens themselves)",
    { access: {}, status: 200, response: accessToken.array() },
    async ({ req }) => (await listAccessTokens(db, tokenOwner(req))).map(tokenOut),
  );

  routes.post(
    "/v1/profile/access-tokens",
    "Creates an access token for the calling user (for the CLI, MCP, scripts): personal (all of the user's privileges), or fine-grained with `permissions`; the token is answered once",
    {
      access: {},
      body: createTokenBody,
      status: 201,
      response: accessToken.extend({ token: z.string() }),
    },
    async ({ req, res, body }) => {
      try {
        const made = await createAccessToken(db, tokenOwner(req), {
          name: body.name,
          permissions: body.permissions,
          expiresAt: body.expires_at ? new Date(body.expires_at) : undefined,
        });
        res.set("cache-control", "no-store");
        return { ...tokenOut(made.row), token: made.token };
      } catch (e) {
        if (e instanceof TokenError) throw new HttpError(400, `Invalid body: ${e.message}`);
        throw e;
      }
    },
  );

  routes.delete(
    "/v1/profile/access-tokens/:id",
    "Deletes one of the calling user's access tokens: it stops working at once",
    { access: {}, status: 200, response: z.object({}) },
    async ({ req, params }) => {
      const owner = tokenOwner(req);
      const id = z.uuid().safeParse(params.id);
      if (!id.success || !(await deleteAccessToken(db, owner, id.data)))
        throw new HttpError(404, `Access token ${params.id} not found`);
      return {};
    },
  );
  return routes.router;
}
