import { createHash } from "node:crypto";
import { jwtVerify, SignJWT } from "jose";
import { withAdminTransaction } from "../../db/transaction";
import { fetchPublicJson } from "../../net/outbound";
import type { ProjectRuntime } from "../../projects/runtime";
import type { AuthSettings } from "../authConfig";
import type { AuthCall } from "../call";
import { AuthApiError, signupDisabled } from "../errors";
import { afterUserCreated, beforeUserCreated } from "../hook";
import { redirectTarget, withParams } from "../redirects";
import { sessionFragment, sessionResponse, type Session } from "../signIn";
import { issueAuthCode, startFlow } from "../store/flowState";
import { linkIdentity, userIdOfIdentity } from "../store/identities";
import { startSession } from "../store/sessions";
import {
  insertExternalUser,
  setProviders,
  setUser,
  userByEmail,
  userById,
  type UserRow,
} from "../store/users";

/** OAuth sign-in (auth-js signInWithOAuth): /authorize sends the browser to the provider, /callback signs in. */

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

/** GET /authorize: the browser sent to the provider, with a signed state (and a PKCE flow when asked). */
export async function authorize({ project, req, res, settings, apiUrl }: AuthCall) {
  const p = providerConfig(settings, String(req.query.provider ?? ""));
  const redirectTo = redirectTarget(settings, req.query.redirect_to);
  let flowStateId: string | undefined;
  const challenge = req.query.code_challenge;
  if (typeof challenge === "string" && challenge) {
    const method = String(req.query.code_challenge_method ?? "s256").toLowerCase();
    if (method !== "s256" && method !== "plain") {
      throw new AuthApiError(400, "validation_failed", "code challenge method not supported");
    }
    flowStateId = await startFlow(project.authPool, {
      challenge,
      challengeMethod: method,
      providerType: p.provider,
      authenticationMethod: "oauth",
    });
  }
  const state = await new SignJWT({
    provider: p.provider,
    redirect_to: redirectTo,
    flow_state_id: flowStateId,
  })
    .setProtectedHeader({ alg: "HS256" })
    .setExpirationTime(`${STATE_SECONDS}s`)
    .sign(stateKey(project));
  const scopes = new Set(["openid", "email", "profile", ...String(req.query.scopes ?? "").split(/[ ,]+/)]);
  const url = new URL(p.authorize);
  url.search = new URLSearchParams({
    client_id: p.clientId,
    redirect_uri: `${apiUrl}/callback`,
    response_type: "code",
    scope: [...scopes].filter(Boolean).join(" "),
    state,
  }).toString();
  res.redirect(302, url.href);
}

type Outcome =
  | { kind: "code"; code: string }
  | { kind: "session"; user: UserRow; session: Session }
  | { kind: "error"; error: AuthApiError };

/**
 * GET /callback: the provider's code exchanged for its user's claims, the user found (by identity, or by a
 * verified address) or made, and the browser sent back with a session or the PKCE flow's code.
 */
export async function callback(call: AuthCall) {
  const { project, req, res, settings } = call;
  let state: { provider: string; redirect_to: string; flow_state_id?: string };
  try {
    state = (await jwtVerify(String(req.query.state ?? ""), stateKey(project), { algorithms: ["HS256"] }))
      .payload as typeof state;
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
    claims = await providerClaims(p, String(req.query.code ?? ""), `${call.apiUrl}/callback`);
  } catch {
    return fail("bad_oauth_callback", "Error getting user profile from external provider");
  }
  if (typeof claims.sub !== "string" || !claims.sub) {
    return fail("bad_oauth_callback", "The provider's user has no subject");
  }
  const subject = claims.sub;
  let created: UserRow | undefined;
  const outcome: Outcome = await withAdminTransaction(project.authPool, async (db): Promise<Outcome> => {
    const identityData = {
      ...claims,
      iss: p.authorize.replace(/\/protocol\/openid-connect\/auth$/, ""),
      provider_id: subject,
      full_name: claims.name,
    };
    const email = typeof claims.email === "string" ? claims.email.toLowerCase() : null;
    const verified = claims.email_verified === true;
    const linked = await userIdOfIdentity(db, p.provider, subject);
    let user: UserRow | undefined = linked ? await userById(db, linked) : undefined;
    if (!user && email && verified) user = await userByEmail(db, email);
    if (!user) {
      if (settings.disable_signup) throw signupDisabled();
      user = await insertExternalUser(db, {
        email,
        confirmed: verified,
        sso: false,
        provider: p.provider,
        metadata: identityData,
      });
      await beforeUserCreated(project.authPool, settings, user, req.ip);
      created = user;
    } else {
      const providers = new Set([...((user.raw_app_meta_data.providers as string[]) ?? []), p.provider]);
      await setProviders(db, user.id, [...providers]);
      if (verified && !user.email_confirmed_at)
        await setUser(db, user.id, { email_confirmed_at: new Date() });
    }
    await linkIdentity(db, { provider: p.provider, subject, userId: user.id, data: identityData });
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
      const code = await issueAuthCode(db, state.flow_state_id, user.id);
      if (code) return { kind: "code", code };
    }
    return {
      kind: "session",
      user: (await userById(db, user.id))!,
      session: await startSession(db, user.id, "oauth"),
    };
  }).catch((e: unknown) => {
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
  const s = await sessionResponse(call, outcome.user, outcome.session, "oauth");
  return res.redirect(303, withParams(target, sessionFragment(s, { provider_token: "" }), "fragment"));
}

/** The provider's claims of its user: the code exchanged at its token endpoint, then its userinfo. */
async function providerClaims(p: ReturnType<typeof providerConfig>, code: string, redirectUri: string) {
  const basic = Buffer.from(`${encodeURIComponent(p.clientId)}:${encodeURIComponent(p.secret)}`).toString(
    "base64",
  );
  const tokens = (await fetchPublicJson(p.token, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${basic}` },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri,
    }).toString(),
  })) as { access_token?: string };
  if (!tokens.access_token) throw new Error("no access token");
  return (await fetchPublicJson(p.userinfo, {
    method: "GET",
    headers: { authorization: `Bearer ${tokens.access_token}` },
  })) as Claims;
}
