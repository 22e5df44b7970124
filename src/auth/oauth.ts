import { createHash, randomUUID } from "node:crypto";
import { Router } from "express";
import { jwtVerify, SignJWT } from "jose";
import { withAdminTransaction } from "../db/transaction";
import type { ProjectRuntime } from "../projects/runtime";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";
import { afterUserCreated, beforeUserCreated } from "./hook";
import { fetchPublicJson } from "../net/outbound";
import { redirectTarget, withParams } from "./redirects";
import type { AuthToolkit, Handle } from "./router";
import { setUser, startSession, userByEmail, userById, type UserRow } from "./users";

/** The OAuth providers Strata signs in with: the generic OpenID Connect slot whose URL is configurable. */
const PROVIDERS = ["keycloak"] as const;
type Provider = (typeof PROVIDERS)[number];
/** A sign-in started at /authorize comes back to /callback within 10 minutes. */
const STATE_SECONDS = 600;

interface Claims {
  sub?: unknown;
  email?: unknown;
  email_verified?: unknown;
  name?: unknown;
  [claim: string]: unknown;
}

/** The key of the signed `state` a provider hands back: derived from the project's JWT secret. */
const stateKey = (project: ProjectRuntime) =>
  createHash("sha256").update(`oauth-state:${project.record.jwtSecret}`).digest();

function providerConfig(settings: AuthSettings, provider: string) {
  if (
    !(PROVIDERS as readonly string[]).includes(provider) ||
    settings[`external_${provider}_enabled`] !== true
  ) {
    throw new AuthApiError(400, "validation_failed", "Unsupported provider: provider is not enabled");
  }
  const base = String(settings[`external_${provider}_url`] ?? "").replace(/\/+$/, "");
  const clientId = String(settings[`external_${provider}_client_id`] ?? "");
  if (!base || !clientId) {
    throw new AuthApiError(400, "validation_failed", `Unsupported provider: ${provider} is not configured`);
  }
  // Keycloak's endpoints under the realm URL.
  return {
    provider: provider as Provider,
    clientId,
    secret: String(settings[`external_${provider}_secret`] ?? ""),
    authorize: `${base}/protocol/openid-connect/auth`,
    token: `${base}/protocol/openid-connect/token`,
    userinfo: `${base}/protocol/openid-connect/userinfo`,
  };
}

/** OAuth sign-in (auth-js signInWithOAuth): /authorize sends the browser to the provider, /callback signs in. */
export function oauthRoutes(tk: AuthToolkit, handle: Handle): Router {
  const router = Router({ caseSensitive: true });

  router.get(
    "/authorize",
    handle(
      async (project, req, res) => {
        const settings = await tk.settings(project);
        const p = providerConfig(settings, String(req.query.provider ?? ""));
        const redirectTo = redirectTarget(settings, req.query.redirect_to);
        let flowStateId: string | undefined;
        const challenge = req.query.code_challenge;
        if (typeof challenge === "string" && challenge) {
          const method = String(req.query.code_challenge_method ?? "s256").toLowerCase();
          if (method !== "s256" && method !== "plain") {
            throw new AuthApiError(400, "validation_failed", "code challenge method not supported");
          }
          const { rows } = await project.authPool.query(
            `insert into auth.flow_state (auth_code, code_challenge_method, code_challenge, provider_type,
                                          authentication_method)
             values ($1, $2, $3, $4, 'oauth') returning id`,
            [randomUUID(), method, challenge, p.provider],
          );
          flowStateId = rows[0].id;
        }
        const state = await new SignJWT({
          provider: p.provider,
          redirect_to: redirectTo,
          flow_state_id: flowStateId,
        })
          .setProtectedHeader({ alg: "HS256" })
          .setExpirationTime(`${STATE_SECONDS}s`)
          .sign(stateKey(project));
        const scopes = new Set([
          "openid",
          "email",
          "profile",
          ...String(req.query.scopes ?? "").split(/[ ,]+/),
        ]);
        const url = new URL(p.authorize);
        url.search = new URLSearchParams({
          client_id: p.clientId,
          redirect_uri: `${tk.apiUrl(req)}/callback`,
          response_type: "code",
          scope: [...scopes].filter(Boolean).join(" "),
          state,
        }).toString();
        res.redirect(302, url.href);
      },
      { keyRequired: false },
    ),
  );

  router.get(
    "/callback",
    handle(
      async (project, req, res) => {
        const settings = await tk.settings(project);
        let state: { provider: string; redirect_to: string; flow_state_id?: string };
        try {
          state = (
            await jwtVerify(String(req.query.state ?? ""), stateKey(project), { algorithms: ["HS256"] })
          ).payload as typeof state;
        } catch {
          throw new AuthApiError(400, "bad_oauth_state", "OAuth state parameter is invalid or has expired");
        }
        const target = redirectTarget(settings, state.redirect_to);
        const fail = (code: string, description: string) =>
          res.redirect(
            303,
            withParams(
              target,
              { error: "server_error", error_code: code, error_description: description },
              "fragment",
            ),
          );
        if (typeof req.query.error === "string") {
          return fail("provider_error", String(req.query.error_description ?? req.query.error));
        }
        const p = providerConfig(settings, state.provider);
        let claims: Claims;
        try {
          const tokens = (await fetchPublicJson(p.token, {
            method: "POST",
            headers: {
              "content-type": "application/x-www-form-urlencoded",
              authorization: `Basic ${Buffer.from(`${encodeURIComponent(p.clientId)}:${encodeURIComponent(p.secret)}`).toString("base64")}`,
            },
            body: new URLSearchParams({
              grant_type: "authorization_code",
              code: String(req.query.code ?? ""),
              redirect_uri: `${tk.apiUrl(req)}/callback`,
            }).toString(),
          })) as { access_token?: string };
          if (!tokens.access_token) throw new Error("no access token");
          claims = (await fetchPublicJson(p.userinfo, {
            method: "GET",
            headers: { authorization: `Bearer ${tokens.access_token}` },
          })) as Claims;
        } catch {
          return fail("bad_oauth_callback", "Error getting user profile from external provider");
        }
        if (typeof claims.sub !== "string" || !claims.sub) {
          return fail("bad_oauth_callback", "The provider's user has no subject");
        }
        type Outcome =
          | { kind: "code"; code: string }
          | { kind: "session"; user: UserRow; session: { sessionId: string; refreshToken: string } }
          | { kind: "error"; error: AuthApiError };
        let created: UserRow | undefined;
        const outcome: Outcome = await withAdminTransaction(
          project.authPool,
          async (db): Promise<Outcome> => {
            const identityData = {
              ...claims,
              iss: p.authorize.replace(/\/protocol\/openid-connect\/auth$/, ""),
              provider_id: claims.sub,
              full_name: claims.name,
            };
            const email = typeof claims.email === "string" ? claims.email.toLowerCase() : null;
            const verified = claims.email_verified === true;
            const { rows } = await db.query(
              "select user_id from auth.identities where provider = $1 and provider_id = $2",
              [p.provider, claims.sub],
            );
            let user: UserRow | undefined = rows[0] ? await userById(db, rows[0].user_id) : undefined;
            if (!user && email && verified) user = await userByEmail(db, email);
            if (!user) {
              if (settings.disable_signup) {
                throw new AuthApiError(422, "signup_disabled", "Signups not allowed for this instance");
              }
              const inserted = await db.query(
                `insert into auth.users (email, email_confirmed_at, raw_app_meta_data, raw_user_meta_data)
               values ($1, case when $2 then now() end, $3, $4) returning *`,
                [
                  email,
                  verified,
                  JSON.stringify({ provider: p.provider, providers: [p.provider] }),
                  JSON.stringify(identityData),
                ],
              );
              user = inserted.rows[0] as UserRow;
              await beforeUserCreated(project.authPool, settings, user, req.ip);
              created = user;
            } else {
              const providers = new Set([
                ...((user.raw_app_meta_data.providers as string[]) ?? []),
                p.provider,
              ]);
              await db.query(
                "update auth.users set raw_app_meta_data = raw_app_meta_data || $2::jsonb where id = $1",
                [user.id, JSON.stringify({ providers: [...providers] })],
              );
              if (verified && !user.email_confirmed_at)
                await setUser(db, user.id, { email_confirmed_at: new Date() });
            }
            await db.query(
              `insert into auth.identities (provider_id, user_id, identity_data, provider, last_sign_in_at)
             values ($1, $2, $3, $4, now())
             on conflict (provider_id, provider) do update
               set identity_data = excluded.identity_data, last_sign_in_at = now(), updated_at = now()`,
              [claims.sub, user.id, JSON.stringify(identityData), p.provider],
            );
            // As the platform: an address the provider has not verified is confirmed by mailer_autoconfirm;
            // else its user (kept, with the identity) signs in only with mailer_allow_unverified_email_sign_ins.
            if (email && !(await userById(db, user.id))!.email_confirmed_at) {
              if (settings.mailer_autoconfirm === true) {
                await setUser(db, user.id, { email_confirmed_at: new Date() });
              } else if (settings.mailer_allow_unverified_email_sign_ins !== true) {
                return {
                  kind: "error",
                  error: new AuthApiError(
                    422,
                    "provider_email_needs_verification",
                    `Unverified email with ${p.provider}. Verify the email with ${p.provider} in order to sign in`,
                  ),
                };
              }
            }
            if (state.flow_state_id) {
              const flow = await db.query(
                `update auth.flow_state set user_id = $2, auth_code_issued_at = now(), updated_at = now()
                where id = $1 returning auth_code`,
                [state.flow_state_id, user.id],
              );
              if (flow.rows[0]) return { kind: "code", code: flow.rows[0].auth_code as string };
            }
            return {
              kind: "session",
              user: (await userById(db, user.id))!,
              session: await startSession(db, user.id, "oauth"),
            };
          },
        ).catch((e: unknown) => {
          if (e instanceof AuthApiError && e.status < 500) return { kind: "error" as const, error: e };
          throw e;
        });
        if (outcome.kind === "error") {
          // A user kept unverified was created all the same.
          if (created && outcome.error.errorCode === "provider_email_needs_verification") {
            await afterUserCreated(project.authPool, settings, created, req.ip);
          }
          return fail(outcome.error.errorCode, outcome.error.message);
        }
        if (created) {
          try {
            await afterUserCreated(project.authPool, settings, created, req.ip);
          } catch (e) {
            if (e instanceof AuthApiError && e.status < 500) return fail(e.errorCode, e.message);
            throw e;
          }
        }
        if (outcome.kind === "code") {
          return res.redirect(303, withParams(target, { code: outcome.code }, "query"));
        }
        const s = await tk.sessionResponse(project, req, outcome.user, outcome.session, settings, "oauth");
        return res.redirect(
          303,
          withParams(
            target,
            {
              access_token: String(s.access_token),
              expires_at: String(s.expires_at),
              expires_in: String(s.expires_in),
              provider_token: "",
              refresh_token: String(s.refresh_token),
              token_type: "bearer",
            },
            "fragment",
          ),
        );
      },
      { keyRequired: false },
    ),
  );

  return router;
}
