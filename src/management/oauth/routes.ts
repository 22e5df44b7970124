import express, { Router, type Request, type Response } from "express";
import OAuth2Server, { OAuthError } from "@node-oauth/oauth2-server";
import { z } from "zod";
import type { AppContext } from "../../context";
import { checkRole, HttpError, type Principal } from "../http";
import { managementRoutes, routeTable, type RouteSpec } from "../route";
import {
  CODE_SECONDS,
  createApp,
  grantOfRefreshToken,
  OAUTH_SCOPES,
  oauthModel,
  revokeGrant,
  type OAuthUser,
} from "./model";
import {
  appOrganization,
  claimingOrganizations,
  deleteApp,
  heldProject,
  listApps,
  userOrganizations,
} from "./store";

/**
 * The OAuth 2.0 authorization server for applications registered under an organization, built on
 * @node-oauth/oauth2-server (authorization code with PKCE S256, refresh tokens with rotation): Strata keeps
 * the storage (model.ts) and the HTTP shapes. A user authorises an application by calling
 * GET /v1/oauth/authorize with their personal access token (Strata has no browser sign-in): the answer
 * redirects to the application with a code, which the application exchanges at /v1/oauth/token.
 */

function libraryServer(ctx: AppContext): OAuth2Server {
  return new OAuth2Server({
    model: oauthModel(ctx.platformPool),
    authorizationCodeLifetime: CODE_SECONDS,
    allowEmptyState: true,
    allowExtendedTokenAttributes: false,
    requireClientAuthentication: { authorization_code: true, refresh_token: true },
    alwaysIssueNewRefreshToken: true,
  });
}

/** A request for the library: its form parsers accept only urlencoded bodies, so JSON is passed as if it were. */
function libraryRequest(req: Request, extraHeaders: Record<string, string> = {}): OAuth2Server.Request {
  return new OAuth2Server.Request({
    method: req.method,
    query: req.query as Record<string, string>,
    headers: {
      ...(req.headers as Record<string, string>),
      "content-type": "application/x-www-form-urlencoded",
      ...extraHeaders,
    },
    body: req.body ?? {},
  });
}

/** An OAuth error in the Management API's shape (`message`), with the RFC 6749 fields beside it. */
function answerOAuthError(res: Response, e: OAuthError): void {
  res.status(e.code >= 400 && e.code < 500 ? e.code : 400).json({
    message: e.message,
    error: e.name,
    error_description: e.message,
  });
}

const stringField = z.string().max(2048);

const tokenBody = z.object({
  grant_type: z.enum(["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer"]),
  client_id: stringField.optional(),
  client_secret: stringField.optional(),
  code: stringField.optional(),
  code_verifier: stringField.optional(),
  redirect_uri: stringField.optional(),
  refresh_token: stringField.optional(),
  assertion: stringField.optional(),
  resource: stringField.optional(),
  scope: stringField.optional(),
});

const revokeBody = z.object({
  client_id: stringField,
  client_secret: stringField,
  refresh_token: stringField,
});

const tokenResponse = z.object({
  access_token: z.string(),
  refresh_token: z.string(),
  expires_in: z.number().int(),
  token_type: z.literal("Bearer"),
  scope: z.string(),
});

/** Documents the two client-authenticated endpoints, which do not go through `route()` (no bearer token). */
function document(spec: RouteSpec): void {
  managementRoutes.push(spec);
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new HttpError(400, `Invalid body: ${issue.path.join(".") || "body"}: ${issue.message}`);
  }
  return parsed.data;
}

/** /v1/oauth/token and /v1/oauth/revoke: the client authenticates itself, no bearer token is asked for. */
export function oauthClientRoutes(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  const server = libraryServer(ctx);
  const forms = express.urlencoded({ extended: false, limit: "16kb" });

  document({
    method: "post",
    path: "/v1/oauth/token",
    summary:
      "Exchanges an authorization code (with its PKCE verifier) or a refresh token (rotated on use) for tokens; JSON or form body",
    access: {},
    body: tokenBody,
    status: 200,
    response: tokenResponse,
  });
  router.post("/v1/oauth/token", forms, async (req, res, next) => {
    try {
      const body = parse(tokenBody, req.body);
      if (body.grant_type === "urn:ietf:params:oauth:grant-type:jwt-bearer")
        throw new HttpError(400, "The jwt-bearer grant is not supported");
      const response = new OAuth2Server.Response();
      const token = await server.token(libraryRequest(req), response);
      res
        .set("cache-control", "no-store")
        .status(200)
        .json({
          access_token: token.accessToken,
          refresh_token: token.refreshToken,
          expires_in: Math.round(((token.accessTokenExpiresAt?.getTime() ?? Date.now()) - Date.now()) / 1000),
          token_type: "Bearer",
          scope: (token.scope ?? []).join(" "),
        });
    } catch (e) {
      if (e instanceof OAuthError) answerOAuthError(res, e);
      else next(e);
    }
  });

  document({
    method: "post",
    path: "/v1/oauth/revoke",
    summary: "Revokes a refresh token and every token of its grant; JSON or form body",
    access: {},
    body: revokeBody,
    status: 204,
  });
  router.post("/v1/oauth/revoke", forms, async (req, res, next) => {
    try {
      const body = parse(revokeBody, req.body);
      const client = await oauthModel(ctx.platformPool).getClient(body.client_id, body.client_secret);
      if (!client) throw new HttpError(401, "Invalid client: client credentials are invalid");
      const grant = await grantOfRefreshToken(ctx.platformPool, body.client_id, body.refresh_token);
      // RFC 7009: an unknown token is not an error.
      if (grant) await revokeGrant(ctx.platformPool, grant);
      res.status(204).end();
    } catch (e) {
      next(e);
    }
  });
  return router;
}

const scopeList = z.array(z.enum(OAUTH_SCOPES)).min(1).max(OAUTH_SCOPES.length);

const createAppBody = z
  .object({
    name: z.string().min(1).max(255),
    redirect_uris: z
      .array(z.url({ protocol: /^https?$/ }))
      .min(1)
      .max(20),
    scopes: scopeList.optional(),
  })
  .strict();

const appShape = z.object({
  id: z.string(),
  name: z.string(),
  client_id: z.string(),
  redirect_uris: z.array(z.string()),
  scopes: z.array(z.string()),
  created_at: z.string(),
});

const authorizeQuery = z.object({
  client_id: z.string().max(255),
  redirect_uri: z.string().max(2048),
  response_type: z.literal("code", { error: "only response_type=code is supported" }),
  scope: z.string().max(2048).optional(),
  state: z.string().max(2048).optional(),
  response_mode: z.literal("query", { error: "only response_mode=query is supported" }).optional(),
  code_challenge: z.string().min(43).max(128).optional(),
  code_challenge_method: z
    .literal("S256", { error: "only code_challenge_method=S256 is supported" })
    .optional(),
  organization_slug: z.string().max(255).optional(),
  target_flow: z.string().max(255).optional(),
  resource: z.string().max(2048).optional(),
});

/** The authorize query without scopes or a target (a claim grants one fixed thing), naming the project. */
const projectClaimQuery = z
  .object({ project_ref: z.string().regex(/^[a-z]{20}$/, "must be a project ref") })
  .extend(authorizeQuery.omit({ scope: true, target_flow: true, resource: true }).shape);

/** The consenting user: only a personal access token (the user themself, not a token made for a tool) consents. */
function consentingUser(req: Request): Principal {
  const principal = req.principal!;
  if (principal.permissions !== null || principal.scopes !== null)
    throw new HttpError(403, "Forbidden: only a personal access token may authorise an application");
  return principal;
}

/**
 * Of the user's organizations an authorisation may be for, the one meant: the one `slug` names (404 when it
 * is not among them), else the only one (400 naming `several` when there are more).
 */
function theOrganization<T>(rows: T[], slug: string | undefined, several: string): T {
  if (slug && !rows[0]) throw new HttpError(404, `Organization ${slug} not found`);
  if (rows.length > 1) throw new HttpError(400, several);
  return rows[0];
}

/** The authorize endpoint (a signed-in user) and the registration of applications under an organization. */
export function oauthRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const db = ctx.platformPool;
  const server = libraryServer(ctx);

  /** The library checks client, redirect URI, scope and PKCE, stores the code and redirects with it. */
  async function redirectWithCode(req: Request, res: Response, user: OAuthUser): Promise<undefined> {
    const response = new OAuth2Server.Response();
    try {
      await server.authorize(libraryRequest(req), response, {
        authenticateHandler: { handle: () => user },
      });
    } catch (e) {
      // With a known client and redirect URI the error goes back to the application, as RFC 6749 says.
      if (!(e instanceof OAuthError)) throw e;
      if (!response.headers?.location) {
        answerOAuthError(res, e);
        return undefined;
      }
    }
    res.status(302).location(response.headers!.location).end();
    return undefined;
  }

  /**
   * A consent endpoint: what the code grants is `grant`'s answer for the consenting user (consentingUser)
   * and the query; the library then redirects (302) to the application with the code.
   */
  function consent<Q extends z.ZodType>(
    path: string,
    summary: string,
    query: Q,
    grant: (principal: Principal, query: z.infer<Q>) => Promise<OAuthUser>,
  ): void {
    routes.get(path, summary, { access: {}, query, status: 302 }, async ({ req, res, query }) =>
      redirectWithCode(req, res, await grant(consentingUser(req), query)),
    );
  }

  consent(
    "/v1/oauth/authorize",
    "Authorises an application for the calling user (personal access token) in one organization: redirects (302) to redirect_uri with a code",
    authorizeQuery,
    async (principal, query) => {
      const organization = theOrganization(
        await userOrganizations(db, principal.userId, query.organization_slug ?? null),
        query.organization_slug,
        "You belong to several organizations: name one with organization_slug",
      );
      if (query.scope) {
        const unknown = query.scope
          .split(" ")
          .filter((s) => s && !(OAUTH_SCOPES as readonly string[]).includes(s));
        if (unknown.length) throw new HttpError(400, `Unknown scope(s): ${unknown.join(", ")}`);
      }
      return { id: principal.userId, organizationId: organization.id };
    },
  );

  consent(
    "/v1/oauth/authorize/project-claim",
    "The user (personal access token, Owner or Administrator of the target organization) consents to claim a project of the application's organization: redirects (302) to redirect_uri with a code; the project moves into the user's organization when the application exchanges the code (with its secret) at /v1/oauth/token",
    projectClaimQuery,
    async (principal, query) => {
      const appOrganizationId = await appOrganization(db, query.client_id);
      if (!appOrganizationId) throw new HttpError(400, "Invalid client: unknown client_id");
      // Only a project the application's organization holds can be claimed from it.
      const project = await heldProject(db, query.project_ref, appOrganizationId);
      if (!project)
        throw new HttpError(404, `Project ${query.project_ref} not found among the application's projects`);
      if (project.is_branch)
        throw new HttpError(400, "A branch moves with its parent project; claim the parent");
      const organization = theOrganization(
        await claimingOrganizations(db, principal.userId, query.organization_slug ?? null),
        query.organization_slug,
        "You administer several organizations: name one with organization_slug",
      );
      if (!organization)
        throw new HttpError(403, "Forbidden: claiming a project needs an organization you own or administer");
      checkRole(organization.role_name, { and: ["organization_admin_write", "project_admin_write"] });
      if (organization.id === project.organization_id)
        throw new HttpError(400, `The project already belongs to ${organization.slug}`);
      return { id: principal.userId, organizationId: organization.id, claimProjectRef: query.project_ref };
    },
  );

  routes.post(
    "/v1/organizations/:slug/oauth/apps",
    "Registers an OAuth application under the organization; the client secret is answered once",
    {
      organization: true,
      access: { permission: "organization_admin_write" },
      body: createAppBody,
      status: 201,
      response: appShape.extend({ client_secret: z.string() }),
    },
    async ({ organization: org, req, body }) => {
      checkRole(org.role_name, "organization_admin_write");
      const scopes = body.scopes ?? [...OAUTH_SCOPES];
      const app = await createApp(db, {
        organizationId: org.id,
        name: body.name,
        redirectUris: body.redirect_uris,
        scopes,
        createdBy: req.principal!.userId,
      });
      return {
        id: app.id,
        name: body.name,
        client_id: app.client_id,
        client_secret: app.client_secret,
        redirect_uris: body.redirect_uris,
        scopes,
        created_at: app.created_at.toISOString(),
      };
    },
  );

  routes.get(
    "/v1/organizations/:slug/oauth/apps",
    "Lists the organization's OAuth applications (without secrets)",
    {
      organization: true,
      access: { permission: "organization_admin_read", scope: "organizations:read" },
      status: 200,
      response: appShape.array(),
    },
    async ({ organization: org }) => {
      return (await listApps(db, org.id)).map((r) => ({ ...r, created_at: r.created_at.toISOString() }));
    },
  );

  routes.delete(
    "/v1/organizations/:slug/oauth/apps/:client_id",
    "Deletes an OAuth application; every token issued to it stops working",
    { organization: true, access: { permission: "organization_admin_write" }, status: 200 },
    async ({ organization: org, params }) => {
      checkRole(org.role_name, "organization_admin_write");
      if (!(await deleteApp(db, org.id, params.client_id)))
        throw new HttpError(404, `OAuth application ${params.client_id} not found`);
      return {};
    },
  );

  return routes.router;
}
