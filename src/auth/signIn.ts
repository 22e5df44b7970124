import type { AuthLogLocals } from "./authLogs";
import type { AuthCall } from "./call";
import { runAccessTokenHook } from "./hook";
import { signProjectToken } from "./issueToken";
import { sessionAssurance } from "./store/sessions";
import { apiUser, type UserRow } from "./store/users";

/** What a sign-in answers: the session's access token (its claims, after the custom access token hook) and refresh token. */

export interface Session {
  sessionId: string;
  refreshToken: string;
}

export type SessionResponse = Awaited<ReturnType<typeof sessionResponse>>;

/** Access token and refresh token of a session, in the auth client's session shape. */
export async function sessionResponse(call: AuthCall, user: UserRow, session: Session, method: string) {
  const { project, settings } = call;
  const iat = Math.floor(Date.now() / 1000);
  const exp = iat + Number(settings.jwt_exp);
  const assurance = await sessionAssurance(project.authPool, session.sessionId);
  let claims: Record<string, unknown> = {
    iss: call.apiUrl,
    sub: user.id,
    aud: user.aud,
    exp,
    iat,
    email: user.email ?? "",
    phone: user.phone ?? "",
    app_metadata: user.raw_app_meta_data,
    user_metadata: user.raw_user_meta_data,
    role: user.role,
    aal: assurance?.aal ?? "aal1",
    amr: assurance?.amr ?? [],
    session_id: session.sessionId,
    is_anonymous: user.is_anonymous,
  };
  claims = await runAccessTokenHook(project.authPool, settings, {
    user_id: user.id,
    claims,
    authentication_method: method,
  });
  const accessToken = await signProjectToken(project, claims);
  (call.res.locals as AuthLogLocals).authUserId = user.id;
  return {
    access_token: accessToken,
    token_type: "bearer",
    expires_in: Number(settings.jwt_exp),
    expires_at: exp,
    refresh_token: session.refreshToken,
    user: await apiUser(project.authPool, user),
  };
}

/** A session as a browser redirect's fragment carries it (verified links, OAuth and SAML sign-ins). */
export function sessionFragment(
  s: SessionResponse,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    access_token: String(s.access_token),
    expires_at: String(s.expires_at),
    expires_in: String(s.expires_in),
    refresh_token: String(s.refresh_token),
    token_type: "bearer",
    ...extra,
  };
}
