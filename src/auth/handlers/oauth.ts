import { createHash, randomBytes, randomUUID } from "node:crypto";
import { EncryptJWT, jwtDecrypt } from "jose";
import { withAdminTransaction } from "../../db/transaction";
import type { ProjectRuntime } from "../../projects/runtime";
import { noteRefusal } from "../authLogs";
import type { AuthCall } from "../call";
import { AuthApiError } from "../errors";
import { linkExternal, signInExternal } from "../externalAccounts";
import {
  authorizeUrl,
  exchangeCode,
  identityData,
  providerUser,
  resolveProvider,
} from "../externalProviders";
import { exchangeVerifier, requestTokenRedirect } from "../oauth1";
import type { ProviderTokens } from "../providerSpec";
import { afterUserCreated, beforeUserCreated } from "../hook";
import type { ProviderUser } from "../idTokens";
import { redirectTarget, withParams } from "../redirects";
import { sessionFragment, sessionResponse, type Session } from "../signIn";
import { deleteFlow, issueAuthCode, saveProviderTokens, startFlow } from "../store/flowState";
import { startSession } from "../store/sessions";
import { userById, type UserRow } from "../store/users";

/**
 * OAuth sign-in (auth-js signInWithOAuth) and linking (linkIdentity): /authorize, or /user/identities/authorize
 * for a signed-in user, sends the browser to the provider with a signed state; /callback exchanges the
 * provider's code for its user and signs that user in (or links the identity), answering the browser with a
 * session, or the PKCE flow's code, and the provider's tokens.
 */

/** A sign-in started at /authorize comes back to /callback within 10 minutes. */
const STATE_SECONDS = 600;

/** Parameters of the provider's authorize URL that Strata sets: a caller's are not passed on. */
const RESERVED_PARAMS = new Set([
  "provider",
  "scopes",
  "redirect_to",
  "code_challenge",
  "code_challenge_method",
  "skip_http_redirect",
  "invite_token",
  "client_id",
  "redirect_uri",
  "response_type",
  "response_mode",
  "scope",
  "state",
  "apikey",
]);

interface OAuthState {
  provider: string;
  redirect_to: string;
  flow_state_id?: string;
  /** linkIdentity: the signed-in user the identity is linked to. */
  link_user_id?: string;
  /** The verifier of the provider's own PKCE (X). */
  code_verifier?: string;
  /** An OAuth 1.0a sign-in's id, which its request token is bound to. */
  oauth1_id?: string;
}

/**
 * The key of the `state` a provider hands back, derived from the project's JWT secret: the state is an
 * encrypted JWT (it carries the provider's PKCE verifier, which only Strata may read).
 */
const stateKey = (project: ProjectRuntime) =>
  createHash("sha256").update(`oauth-state:${project.record.jwtSecret}`).digest();

/** The caller's extra query parameters (auth-js queryParams), passed on to the provider. */
function passedOn(query: AuthCall["req"]["query"]): Record<string, string> {
  const extra: Record<string, string> = {};
  for (const [key, value] of Object.entries(query)) {
    if (typeof value !== "string" || RESERVED_PARAMS.has(key.toLowerCase())) continue;
    // WorkOS names its connection's provider `provider`, which Strata's own parameter takes.
    extra[key === "workos_provider" ? "provider" : key] = value;
  }
  return extra;
}

/** The provider's authorize URL of a sign-in (or a link to `linkUserId`) the request starts. */
export async function providerRedirect(call: AuthCall, linkUserId?: string): Promise<string> {
  const { project, req, settings, apiUrl } = call;
  const { spec, p } = await resolveProvider(
    project.authPool,
    settings,
    call.ctx.config.authProviderBases,
    String(req.query.provider ?? ""),
  );
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
      providerType: p.name,
      authenticationMethod: "oauth",
    });
  }
  const codeVerifier = spec.requiresPkce ? randomBytes(32).toString("base64url") : undefined;
  const claims: OAuthState = {
    provider: p.name,
    redirect_to: redirectTo,
    flow_state_id: flowStateId,
    link_user_id: linkUserId,
    code_verifier: codeVerifier,
    oauth1_id: spec.oauth1 ? randomUUID() : undefined,
  };
  const state = await new EncryptJWT({ ...claims })
    .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
    .setExpirationTime(`${STATE_SECONDS}s`)
    .encrypt(stateKey(project));
  if (spec.oauth1 && claims.oauth1_id) {
    // The provider calls back to the URL the request token was got for: the state rides in it.
    const callbackUrl = withParams(`${apiUrl}/callback`, { state }, "query");
    try {
      return await requestTokenRedirect(
        project.authPool,
        p,
        spec.oauth1.requestToken(p),
        await spec.endpoints(p),
        callbackUrl,
        claims.oauth1_id,
      );
    } catch {
      // Nothing of the refused sign-in is kept.
      if (flowStateId) await deleteFlow(project.authPool, flowStateId);
      throw new AuthApiError(500, "unexpected_failure", "Error getting request token from external provider");
    }
  }
  return authorizeUrl(spec, p, {
    redirectUri: `${apiUrl}/callback`,
    state,
    scopes: String(req.query.scopes ?? ""),
    extra: passedOn(req.query),
    codeChallenge: codeVerifier && createHash("sha256").update(codeVerifier).digest("base64url"),
  });
}

/** GET /authorize: the browser sent to the provider. */
export async function authorize(call: AuthCall) {
  call.res.redirect(302, await providerRedirect(call));
}

type Outcome =
  | { kind: "code"; code: string }
  | { kind: "session"; user: UserRow; session: Session }
  | { kind: "error"; error: AuthApiError };

/** The callback's parameters: the query, or the form a provider posts (Apple's response_mode=form_post). */
const callbackParams = (call: AuthCall): Record<string, unknown> =>
  call.req.method === "POST" ? { ...(call.req.body ?? {}) } : { ...call.req.query };

/**
 * GET or POST /callback: the provider's code exchanged for its user, who is signed in (or linked), and the
 * browser sent back with a session or the PKCE flow's code.
 */
export async function callback(call: AuthCall) {
  const { project, req, res, settings } = call;
  const params = callbackParams(call);
  let state: OAuthState;
  try {
    state = (
      await jwtDecrypt(String(params.state ?? ""), stateKey(project), {
        keyManagementAlgorithms: ["dir"],
        contentEncryptionAlgorithms: ["A256GCM"],
      })
    ).payload as unknown as OAuthState;
  } catch {
    throw new AuthApiError(400, "bad_oauth_state", "OAuth state parameter is invalid or has expired");
  }
  const target = redirectTarget(settings, state.redirect_to);
  const fail = (code: string, description: string) => {
    noteRefusal(res, new AuthApiError(400, code, description));
    res.redirect(
      303,
      withParams(
        target,
        { error: "server_error", error_code: code, error_description: description },
        "fragment",
      ),
    );
  };
  if (typeof params.error === "string") {
    return fail("provider_error", String(params.error_description ?? params.error));
  }
  const { spec, p } = await resolveProvider(
    project.authPool,
    settings,
    call.ctx.config.authProviderBases,
    state.provider,
  );
  let tokens: ProviderTokens;
  let user: ProviderUser;
  try {
    tokens =
      spec.oauth1 && state.oauth1_id
        ? await exchangeVerifier(project.authPool, p, await spec.endpoints(p), state.oauth1_id, params)
        : await exchangeCode(
            spec,
            p,
            String(params.code ?? ""),
            `${call.apiUrl}/callback`,
            state.code_verifier,
          );
    user = await providerUser(spec, p, tokens, params);
  } catch {
    return fail("bad_oauth_callback", "Error getting user profile from external provider");
  }
  if (!user.emails.length && !p.emailOptional) {
    return fail("unexpected_failure", "Error getting user email from external provider");
  }
  const data = identityData(user);
  if (typeof data.sub !== "string" || !data.sub) {
    return fail("bad_oauth_callback", "The provider's user has no subject");
  }
  const identity = { provider: p.name, user, data, emailOptional: p.emailOptional };
  let created: UserRow | undefined;
  const outcome: Outcome = await withAdminTransaction(project.authPool, async (db): Promise<Outcome> => {
    let signedIn: UserRow;
    if (state.link_user_id) {
      const linkTarget = await userById(db, state.link_user_id);
      if (!linkTarget) throw new AuthApiError(404, "user_not_found", "User not found");
      signedIn = await linkExternal(db, linkTarget, identity);
    } else {
      const result = await signInExternal(db, settings, identity);
      if (result.created) {
        await beforeUserCreated(project.authPool, settings, result.user, req.ip);
        created = result.user;
      }
      // Refused with the user (and identity) kept: committed all the same.
      if (result.refused) return { kind: "error", error: result.refused };
      signedIn = result.user;
    }
    if (state.flow_state_id) {
      const code = await issueAuthCode(db, state.flow_state_id, signedIn.id, { unclaimed: true });
      if (!code) throw new AuthApiError(400, "flow_state_already_used", "State has already been used");
      await saveProviderTokens(db, state.flow_state_id, {
        access: tokens.access_token,
        refresh: tokens.refresh_token ?? null,
      });
      return { kind: "code", code };
    }
    return { kind: "session", user: signedIn, session: await startSession(db, signedIn.id, "oauth") };
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
  const providerTokens: Record<string, string> = { provider_token: tokens.access_token };
  if (tokens.refresh_token) providerTokens.provider_refresh_token = tokens.refresh_token;
  return res.redirect(303, withParams(target, sessionFragment(s, providerTokens), "fragment"));
}
