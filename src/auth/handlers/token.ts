import { createHash } from "node:crypto";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import type { AuthCall } from "../call";
import { AuthApiError } from "../errors";
import { checkVerificationAttempt } from "../hook";
import { idTokenGrant } from "./idToken";
import { email, parse, takesPhoneFlow } from "../input";
import { passwordWeakness, verifyPassword } from "../passwords";
import { requireEmailProvider, requirePhoneProvider } from "../providers";
import { sessionResponse } from "../signIn";
import { formatPhone } from "../sms";
import { deleteFlow, flowByAuthCode } from "../store/flowState";
import { refreshSession, startSession } from "../store/sessions";
import { userByEmail, userById, userByPhone, type UserRow } from "../store/users";

/**
 * POST /token: a session for a password (grant_type=password), a refresh token, a PKCE auth code, or a
 * provider's ID token (handlers/idToken.ts).
 */

/** A PKCE auth code is exchanged within 5 minutes of being issued. */
const AUTH_CODE_SECONDS = 300;

const credentialsBody = z.object({ email, password: z.string() });
const phonePasswordBody = z.object({ phone: z.string(), password: z.string() });
const refreshBody = z.object({ refresh_token: z.string().min(1) });
const pkceBody = z.object({ auth_code: z.string().min(1), code_verifier: z.string().min(1) });

export async function token(call: AuthCall) {
  const grant = call.req.query.grant_type;
  if (grant === "password") return passwordGrant(call);
  if (grant === "refresh_token") return refreshGrant(call);
  if (grant === "pkce") return pkceGrant(call);
  if (grant === "id_token") return idTokenGrant(call);
  throw new AuthApiError(400, "unsupported_grant_type", "unsupported_grant_type");
}

const userBanned = (user: UserRow) => user.banned_until !== null && user.banned_until.getTime() > Date.now();

/** Signs in with an address or number and its password (auth-js signInWithPassword). */
async function passwordGrant(call: AuthCall) {
  const { project, req, settings } = call;
  let body: { password: string };
  let user: UserRow | undefined;
  if (takesPhoneFlow(req.body, " on login.")) {
    requirePhoneProvider(settings, 422, "Phone logins are disabled");
    const phoneBody = parse(phonePasswordBody, req.body);
    body = phoneBody;
    user = await userByPhone(project.authPool, formatPhone(phoneBody.phone));
  } else {
    requireEmailProvider(settings, "logins");
    const emailBody = parse(credentialsBody, req.body);
    body = emailBody;
    user = await userByEmail(project.authPool, emailBody.email);
  }
  const valid = Boolean(
    user?.encrypted_password && (await verifyPassword(body.password, user.encrypted_password)),
  );
  // The password verification attempt hook hears of every attempt on an existing user.
  if (user) {
    await checkVerificationAttempt(
      project.authPool,
      settings,
      "password_verification_attempt",
      { user_id: user.id, valid },
      req.ip,
    );
  }
  if (!user || !valid) throw new AuthApiError(400, "invalid_credentials", "Invalid login credentials");
  if (userBanned(user)) throw new AuthApiError(400, "user_banned", "User is banned");
  if (req.body?.phone) {
    if (!user.phone_confirmed_at) throw new AuthApiError(400, "phone_not_confirmed", "Phone not confirmed");
  } else if (!user.email_confirmed_at)
    throw new AuthApiError(400, "email_not_confirmed", "Email not confirmed");
  const session = await startSession(project.authPool, user.id, "password");
  const response = await sessionResponse(call, user, session, "password");
  const weak = passwordWeakness(body.password, settings);
  return weak ? { ...response, weak_password: weak } : response;
}

/** A refresh token exchanged within the project's session limits (rotation, reuse, timebox, inactivity). */
async function refreshGrant(call: AuthCall) {
  const { project, req, settings } = call;
  const body = parse(refreshBody, req.body);
  const outcome = await refreshSession(project.authPool, body.refresh_token, {
    rotate: Boolean(settings.refresh_token_rotation_enabled),
    reuseIntervalSeconds: Number(settings.security_refresh_token_reuse_interval),
    timeboxSeconds: Number(settings.sessions_timebox) || 0,
    inactivitySeconds: Number(settings.sessions_inactivity_timeout) || 0,
    singlePerUser: Boolean(settings.sessions_single_per_user),
    tags: String(settings.sessions_tags ?? "")
      .split(",")
      .map((t) => t.trim())
      .filter(Boolean),
  });
  if (outcome.kind === "expired") throw new AuthApiError(400, "session_expired", outcome.message);
  if (outcome.kind === "not_found") {
    throw new AuthApiError(400, "refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found");
  }
  if (outcome.kind === "reused") {
    throw new AuthApiError(400, "refresh_token_already_used", "Invalid Refresh Token: Already Used");
  }
  const user = (await userById(project.authPool, outcome.userId))!;
  if (userBanned(user)) throw new AuthApiError(400, "user_banned", "User is banned");
  return sessionResponse(call, user, outcome, "token_refresh");
}

/** A PKCE flow's auth code and the verifier of its challenge, exchanged once for a session. */
async function pkceGrant(call: AuthCall) {
  const body = parse(pkceBody, call.req.body);
  const { user, session, flow } = await withAdminTransaction(call.project.authPool, async (db) => {
    const flow = await flowByAuthCode(db, body.auth_code);
    if (!flow)
      throw new AuthApiError(404, "flow_state_not_found", "invalid flow state, no valid flow state found");
    if (Number(flow.age) > AUTH_CODE_SECONDS) {
      throw new AuthApiError(400, "flow_state_expired", "invalid flow state, flow state has expired");
    }
    const challenge =
      flow.code_challenge_method === "plain"
        ? body.code_verifier
        : createHash("sha256").update(body.code_verifier).digest("base64url");
    if (challenge !== flow.code_challenge) {
      throw new AuthApiError(
        400,
        "bad_code_verifier",
        "code challenge does not match previously saved code verifier",
      );
    }
    await deleteFlow(db, flow.id);
    const user = (await userById(db, flow.user_id))!;
    // The session's amr names how the flow signed in (magic link, OAuth, SAML); email codes are otp.
    const method = ["magiclink", "oauth", "sso/saml"].includes(flow.authentication_method)
      ? flow.authentication_method
      : "otp";
    return { user, flow, session: await startSession(db, user.id, method) };
  });
  const response = await sessionResponse(call, user, session, "pkce");
  // An OAuth flow answers the provider's tokens as well.
  return {
    ...response,
    ...(flow.provider_access_token ? { provider_token: flow.provider_access_token } : {}),
    ...(flow.provider_refresh_token ? { provider_refresh_token: flow.provider_refresh_token } : {}),
  };
}
