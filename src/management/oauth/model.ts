import { withAdminTransaction } from "../../db/transaction";
import { randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type OAuth2Server from "@node-oauth/oauth2-server";
import { InvalidGrantError } from "@node-oauth/oauth2-server";
import type pg from "pg";
import { sha256 } from "../../platform/ids";
import { firstRow } from "../rows";

/** Every OAuth scope the spec's endpoints name (the S column). */
export const OAUTH_SCOPES = [
  "analytics:read",
  "analytics_config:read",
  "analytics_config:write",
  "auth:read",
  "auth:write",
  "database:read",
  "database:write",
  "domains:read",
  "domains:write",
  "edge_functions:read",
  "edge_functions:write",
  "environment:read",
  "environment:write",
  "organizations:read",
  "projects:read",
  "projects:write",
  "rest:read",
  "rest:write",
  "secrets:read",
  "secrets:write",
  "storage:read",
] as const;

/** Access tokens live an hour, refresh tokens 30 days (each replaced on use). */
export const ACCESS_TOKEN_SECONDS = 3600;
export const REFRESH_TOKEN_SECONDS = 30 * 24 * 3600;
export const CODE_SECONDS = 600;

/** The resource owner as the authorization server carries it: a user acting in one organization. */
export interface OAuthUser {
  id: string;
  organizationId: string;
  /** Set once a grant exists (refresh): its new tokens join it. */
  grantId?: string;
  /** A project-claim code: the project moves into `organizationId` when the code is exchanged. */
  claimProjectRef?: string;
}

export interface OAuthClient extends OAuth2Server.Client {
  id: string;
  appId: string;
  redirectUris: string[];
  scopes: string[];
}

const newToken = (prefix: string) => prefix + randomBytes(24).toString("hex");

function secretMatches(stored: string, given: string): boolean {
  const a = Buffer.from(stored, "hex");
  const b = Buffer.from(sha256(given), "hex");
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The storage side of @node-oauth/oauth2-server: applications, codes and tokens in the control plane,
 * each secret kept as a hash. Access tokens are rows of platform.access_tokens, so the Management API's
 * caller identification (http.ts) reads them like any token, with their scopes.
 */
export function oauthModel(
  db: pg.Pool,
): OAuth2Server.AuthorizationCodeModel & OAuth2Server.RefreshTokenModel {
  /** A code's or refresh token's row, found by the hash of its value, with its application's client_id. */
  const issuedRow = (
    table: "oauth_codes" | "oauth_refresh_tokens",
    hashColumn: "code_hash" | "token_hash",
    value: string,
  ) =>
    firstRow(
      db,
      `select t.*, a.client_id from platform.${table} t join platform.oauth_apps a on a.id = t.app_id
        where t.${hashColumn} = $1`,
      [sha256(value)],
    );

  /** At authorize the client is only named (secret null); at the token endpoint it proves its secret. */
  async function getClient(clientId: string, clientSecret: string | null): Promise<OAuthClient | false> {
    const { rows } = await db.query(
      "select id, client_id, client_secret_hash, redirect_uris, scopes from platform.oauth_apps where client_id = $1",
      [clientId],
    );
    const app = rows[0];
    if (!app) return false;
    if (clientSecret !== null && !secretMatches(app.client_secret_hash, clientSecret)) return false;
    const client: OAuthClient = {
      id: app.client_id,
      appId: app.id,
      redirectUris: app.redirect_uris,
      scopes: app.scopes,
      grants: ["authorization_code", "refresh_token"],
      accessTokenLifetime: ACCESS_TOKEN_SECONDS,
      refreshTokenLifetime: REFRESH_TOKEN_SECONDS,
    };
    return client;
  }

  return {
    getClient,

    /** The scopes asked for must be among the application's; none asked: all of them. */
    async validateScope(_user: OAuth2Server.User, client: OAuth2Server.Client, scope?: string[]) {
      const allowed = (client as OAuthClient).scopes;
      if (!scope || scope.length === 0) return allowed;
      return scope.every((s) => allowed.includes(s)) ? [...new Set(scope)] : false;
    },

    async generateAccessToken() {
      return newToken("sbp_oauth_");
    },

    async generateRefreshToken() {
      return newToken("sbp_oauth_refresh_");
    },

    async generateAuthorizationCode() {
      return newToken("");
    },

    async saveAuthorizationCode(code, client, user) {
      const u = user as OAuthUser;
      // Codes that were never exchanged are dropped once expired.
      await db.query("delete from platform.oauth_codes where expires_at < now()");
      await db.query(
        `insert into platform.oauth_codes (code_hash, app_id, user_id, organization_id, scopes, redirect_uri,
                                           code_challenge, code_challenge_method, expires_at, claim_project_ref)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [
          sha256(code.authorizationCode),
          (client as OAuthClient).appId,
          u.id,
          u.organizationId,
          code.scope ?? [],
          code.redirectUri,
          code.codeChallenge ?? null,
          code.codeChallengeMethod ?? null,
          code.expiresAt,
          u.claimProjectRef ?? null,
        ],
      );
      return { ...code, client, user };
    },

    async getAuthorizationCode(code: string) {
      const row = await issuedRow("oauth_codes", "code_hash", code);
      if (!row) return false;
      const client = (await getClient(row.client_id, null)) as OAuthClient;
      return {
        authorizationCode: code,
        expiresAt: row.expires_at,
        redirectUri: row.redirect_uri ?? undefined,
        scope: row.scopes,
        client,
        user: {
          id: row.user_id,
          organizationId: row.organization_id,
          ...(row.claim_project_ref ? { claimProjectRef: row.claim_project_ref } : {}),
        } satisfies OAuthUser,
        ...(row.code_challenge
          ? { codeChallenge: row.code_challenge, codeChallengeMethod: row.code_challenge_method }
          : {}),
      };
    },

    /** A code is used once: deleting it is what makes a second exchange fail. */
    async revokeAuthorizationCode(code) {
      const { rowCount } = await db.query("delete from platform.oauth_codes where code_hash = $1", [
        sha256(code.authorizationCode),
      ]);
      return rowCount === 1;
    },

    async saveToken(token, client, user) {
      const u = user as OAuthUser;
      const app = client as OAuthClient;
      const grantId = u.grantId ?? randomUUID();
      const scopes = token.scope ?? [];
      const c = await db.connect();
      try {
        // Expired tokens of any grant go; revoked refresh tokens stay until they expire (reuse detection).
        await c.query(
          "delete from platform.access_tokens where oauth_grant_id is not null and expires_at < now()",
        );
        await c.query("delete from platform.oauth_refresh_tokens where expires_at < now()");
        await withAdminTransaction(c, async () => {
          if (u.claimProjectRef) await claimProject(c, u, app.appId);
          await c.query(
            `insert into platform.access_tokens (user_id, name, token_hash, token_prefix, scopes, expires_at,
                                                 oauth_app_id, oauth_grant_id, organization_id)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
            [
              u.id,
              `OAuth: ${app.id}`,
              sha256(token.accessToken),
              token.accessToken.slice(0, 14),
              scopes,
              token.accessTokenExpiresAt,
              app.appId,
              grantId,
              u.organizationId,
            ],
          );
          if (token.refreshToken) {
            await c.query(
              `insert into platform.oauth_refresh_tokens (token_hash, grant_id, app_id, user_id, organization_id,
                                                          scopes, expires_at)
               values ($1, $2, $3, $4, $5, $6, $7)`,
              [
                sha256(token.refreshToken),
                grantId,
                app.appId,
                u.id,
                u.organizationId,
                scopes,
                token.refreshTokenExpiresAt,
              ],
            );
          }
        });
      } finally {
        c.release();
      }
      return { ...token, client, user };
    },

    /**
     * A live refresh token, or nothing. One that was already replaced or revoked, presented again, means it
     * leaked: every token of its grant is revoked.
     */
    async getRefreshToken(refreshToken: string) {
      const row = await issuedRow("oauth_refresh_tokens", "token_hash", refreshToken);
      if (!row) return false;
      if (row.revoked_at) {
        await revokeGrant(db, row.grant_id);
        return false;
      }
      const client = (await getClient(row.client_id, null)) as OAuthClient;
      return {
        refreshToken,
        refreshTokenExpiresAt: row.expires_at,
        scope: row.scopes,
        client,
        user: {
          id: row.user_id,
          organizationId: row.organization_id,
          grantId: row.grant_id,
        } satisfies OAuthUser,
      };
    },

    /** Rotation: the used refresh token is spent, and the access tokens issued before it end with it. */
    async revokeToken(token) {
      const { rows } = await db.query(
        `update platform.oauth_refresh_tokens set revoked_at = now()
          where token_hash = $1 and revoked_at is null returning grant_id`,
        [sha256(token.refreshToken)],
      );
      if (!rows[0]) return false;
      await db.query("delete from platform.access_tokens where oauth_grant_id = $1", [rows[0].grant_id]);
      return true;
    },

    async getAccessToken() {
      // Access tokens are checked by the Management API's own caller identification.
      return false;
    },

    async verifyScope() {
      return false;
    },
  };
}

/**
 * The claim a project-claim code carries, done when the application exchanges the code (proving its
 * secret): the project (with its branches) moves from the application's organization into the one the user
 * chose, provided it is still the application's and the user still administers the target. Otherwise the
 * exchange fails and nothing is issued.
 */
async function claimProject(c: pg.PoolClient, u: OAuthUser, appId: string): Promise<void> {
  const { rowCount } = await c.query(
    `update platform.projects set organization_id = $2, updated_at = now()
      where (ref = $1 or ref in (select project_ref from platform.branches where parent_project_ref = $1))
        and organization_id = (select organization_id from platform.oauth_apps where id = $3)
        and exists (select from platform.projects p, platform.oauth_apps a
                     where p.ref = $1 and a.id = $3 and p.organization_id = a.organization_id)
        and exists (select from platform.organization_members m
                     where m.organization_id = $2 and m.user_id = $4 and m.role_name in ('Owner', 'Administrator'))`,
    [u.claimProjectRef, u.organizationId, appId, u.id],
  );
  if (!rowCount) throw new InvalidGrantError("Invalid grant: the project can no longer be claimed");
}

/** Ends a grant: its access tokens are deleted and its refresh tokens revoked. */
export async function revokeGrant(db: pg.Pool, grantId: string): Promise<void> {
  await db.query(
    "update platform.oauth_refresh_tokens set revoked_at = coalesce(revoked_at, now()) where grant_id = $1",
    [grantId],
  );
  await db.query("delete from platform.access_tokens where oauth_grant_id = $1", [grantId]);
}

/** The grant of a refresh token issued to `clientId` (revocation); undefined when it is not one. */
export async function grantOfRefreshToken(
  db: pg.Pool,
  clientId: string,
  refreshToken: string,
): Promise<string | undefined> {
  const row = await firstRow(
    db,
    `select r.grant_id from platform.oauth_refresh_tokens r join platform.oauth_apps a on a.id = r.app_id
      where r.token_hash = $1 and a.client_id = $2`,
    [sha256(refreshToken), clientId],
  );
  return row?.grant_id;
}

/** Registers an application; its client secret is answered once and kept only as a hash. */
export async function createApp(
  db: pg.Pool,
  app: { organizationId: string; name: string; redirectUris: string[]; scopes: string[]; createdBy: string },
): Promise<{ id: string; client_id: string; client_secret: string; created_at: Date }> {
  const clientId = randomUUID();
  const secret = newToken("sba_");
  const { rows } = await db.query(
    `insert into platform.oauth_apps (organization_id, name, client_id, client_secret_hash, redirect_uris, scopes, created_by)
     values ($1, $2, $3, $4, $5, $6, $7) returning id, created_at`,
    [app.organizationId, app.name, clientId, sha256(secret), app.redirectUris, app.scopes, app.createdBy],
  );
  return { id: rows[0].id, client_id: clientId, client_secret: secret, created_at: rows[0].created_at };
}
