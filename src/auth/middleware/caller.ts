import { bearerAuthOf, GateError } from "../../http/gate";
import type { AuthCall, CurrentUser, SignedIn } from "../call";
import { AuthApiError } from "../errors";
import { sessionAssurance, sessionExists } from "../store/sessions";
import { userById } from "../store/users";

/**
 * Who calls, on the routes that need more than the API key (the table's `access`): `user` a bearer JWT of
 * the project's user (the platform's requireAuthentication), `session` a live session of one (MFA), `admin`
 * the service role (requireAdminCredentials).
 */

/** The signed-in user of a request: a valid bearer JWT of a live session (or a token's claims alone). */
export async function currentUser({ project, req }: AuthCall): Promise<CurrentUser> {
  // /auth/v1 acts for this project's own users: a third-party provider's token is not one of theirs.
  const bearer = await bearerAuthOf(project, req, "anon", { thirdParty: false }).catch((e: unknown) => {
    // An expired token of the project is the platform's 403 bad_jwt; other refusals stay the gate's 401.
    if (e instanceof GateError && e.code === "invalid_jwt" && /JWT expired$/.test(e.message)) {
      throw new AuthApiError(403, "bad_jwt", "invalid JWT: token is expired");
    }
    throw e;
  });
  if (!bearer) throw new AuthApiError(401, "no_authorization", "This endpoint requires a valid Bearer token");
  const { claims } = bearer;
  if (typeof claims.sub !== "string")
    throw new AuthApiError(403, "bad_jwt", "invalid claim: missing sub claim");
  const user = await userById(project.authPool, claims.sub);
  const sessionId = typeof claims.session_id === "string" ? claims.session_id : null;
  if (sessionId) {
    if (!user || !(await sessionExists(project.authPool, sessionId))) {
      throw new AuthApiError(403, "session_not_found", "Session from session_id claim in JWT does not exist");
    }
  }
  return { claims, user, sessionId };
}

/** A live session of the project's user, with its assurance level. */
export async function signedInSession(call: AuthCall): Promise<SignedIn> {
  const current = await currentUser(call);
  if (!current.user || !current.sessionId) {
    throw new AuthApiError(401, "no_authorization", "This endpoint requires a session of the project's user");
  }
  const assurance = await sessionAssurance(call.project.authPool, current.sessionId);
  return { user: current.user, sessionId: current.sessionId, aal: assurance?.aal ?? "aal1" };
}

/** The service role: a service_role bearer token, or (without a valid bearer) the service key. */
export async function requireAdmin({ project, req, key }: AuthCall): Promise<void> {
  const bearer = await bearerAuthOf(project, req, "anon", { thirdParty: false }).catch(() => undefined);
  const role = bearer ? bearer.role : key.role;
  if (role !== "service_role") throw new AuthApiError(403, "not_admin", "User not allowed");
}
