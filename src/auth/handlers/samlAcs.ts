import { withAdminTransaction } from "../../db/transaction";
import { noteRefusal } from "../authLogs";
import type { AuthCall } from "../call";
import { AuthApiError, signupDisabled } from "../errors";
import { afterUserCreated, beforeUserCreated } from "../hook";
import { uuid } from "../input";
import { redirectTarget, withParams } from "../redirects";
import {
  assertedUser,
  consumeOnce,
  refreshedProvider,
  requireSaml,
  samlBase,
  serviceProvider,
  verifyResponse,
  type AssertedUser,
} from "../samlProvider";
import { sessionFragment, sessionResponse } from "../signIn";
import { issueAuthCode } from "../store/flowState";
import { linkIdentity, userIdOfIdentity } from "../store/identities";
import { ssoProviders, takeRelayState, type SsoProvider } from "../store/saml";
import { bindSsoSession, startSession } from "../store/sessions";
import { insertExternalUser, refreshSsoUser, userById, type UserRow } from "../store/users";

/**
 * POST /sso/saml/acs: the identity provider's signed answer (HTTP-POST binding, a form), for a sign-in
 * started at POST /sso (its relay state) or at the identity provider; the browser goes on to the redirect
 * target with a session or the PKCE flow's code, or back to the site URL with the error.
 */

/** An AuthnRequest must come back within 2 minutes (the platform's relay state validity). */
const RELAY_STATE_SECONDS = 120;

/** oauth error names of the platform's error redirects, by status. */
const OAUTH_ERRORS: Record<number, string> = {
  400: "invalid_request",
  401: "unauthorized_client",
  403: "access_denied",
  500: "server_error",
  503: "temporarily_unavailable",
};

export async function acs(call: AuthCall) {
  try {
    call.res.redirect(302, await consumeAssertion(call));
  } catch (e) {
    if (!(e instanceof AuthApiError)) throw e;
    noteRefusal(call.res, e);
    // As the platform: errors go back to the site URL's query.
    const query = {
      error: OAUTH_ERRORS[e.status] ?? "server_error",
      error_code: e.errorCode,
      error_description: e.message,
    };
    call.res.redirect(303, withParams(String(call.settings.site_url), query, "query"));
  }
}

/** The sign-in a response answers: its provider, the request it names, and where the browser goes after. */
interface Solicitation {
  provider: SsoProvider | undefined;
  requestId: string | undefined;
  flowStateId: string | null;
  redirectTo: string;
}

/**
 * The sign-in of a relay state: one started here (a uuid: the relay state names the provider and the
 * request, and is used once), or one the identity provider started (its issuer names the provider; the relay
 * state, if any, is where to go).
 */
async function solicitation(
  { project }: AuthCall,
  relayValue: string,
  samlResponse: string,
): Promise<Solicitation> {
  const items = await ssoProviders(project.platformPool, project.ref);
  if (uuid.safeParse(relayValue).success) {
    const relay = await takeRelayState(project.authPool, relayValue);
    if (!relay) {
      throw new AuthApiError(
        404,
        "saml_relay_state_not_found",
        "SAML RelayState does not exist, try logging in again?",
      );
    }
    if (Number(relay.age) >= RELAY_STATE_SECONDS) {
      throw new AuthApiError(
        422,
        "saml_relay_state_expired",
        "SAML RelayState has expired. Try logging in again?",
      );
    }
    const provider = items.find((p) => p.id === relay.sso_provider_id);
    if (!provider)
      throw new AuthApiError(500, "unexpected_failure", "Unable to find SSO Provider from SAML RelayState");
    return {
      provider,
      requestId: relay.request_id,
      flowStateId: relay.flow_state_id,
      redirectTo: relay.redirect_to ?? "",
    };
  }
  if (relayValue === "" || URL.canParse(relayValue)) {
    const xml = Buffer.from(samlResponse, "base64").toString("utf8");
    const issuer = /<(?:\w+:)?Issuer\b[^>]*>\s*([^<\s]+)\s*<\/(?:\w+:)?Issuer>/.exec(xml)?.[1];
    if (!issuer)
      throw new AuthApiError(400, "validation_failed", "SAMLResponse is not a valid XML SAML assertion");
    return {
      provider: items.find((p) => p.saml.entity_id === issuer),
      requestId: undefined,
      flowStateId: null,
      redirectTo: relayValue,
    };
  }
  throw new AuthApiError(400, "validation_failed", "SAML RelayState is not a valid UUID or URL");
}

/** Verifies the identity provider's answer, signs its user in and answers where the browser goes next. */
async function consumeAssertion(call: AuthCall): Promise<string> {
  const { project, req, settings } = call;
  requireSaml(settings);
  const body = (req.body ?? {}) as Record<string, unknown>;
  const relayValue = typeof body.RelayState === "string" ? body.RelayState : "";
  const samlResponse = typeof body.SAMLResponse === "string" ? body.SAMLResponse : "";
  if (!samlResponse) throw new AuthApiError(400, "validation_failed", "SAMLResponse is missing");
  const solicited = await solicitation(call, relayValue, samlResponse);
  const { requestId, flowStateId, redirectTo } = solicited;
  const provider = solicited.provider && (await refreshedProvider(project, solicited.provider));
  if (!provider) {
    throw new AuthApiError(
      404,
      "saml_idp_not_found",
      "A SAML connection has not been established with this Identity Provider",
    );
  }
  const apiUrl = samlBase(settings, call.apiUrl);
  const encrypted = /<(?:\w+:)?EncryptedAssertion\b/.test(
    Buffer.from(samlResponse, "base64").toString("utf8"),
  );
  if (encrypted && settings.saml_allow_encrypted_assertions !== true) {
    throw new AuthApiError(
      400,
      "validation_failed",
      "SAML Assertion is not valid: encrypted assertions are not allowed",
    );
  }
  const sp = await serviceProvider(call, { encryption: encrypted });
  const { extract, content } = await verifyResponse(sp, provider, samlResponse, {
    apiUrl,
    requestId,
    encrypted,
  });
  await consumeOnce(project, extract, content);
  const asserted = assertedUser(provider, extract, content);
  const { outcome, created } = await signInAsserted(call, provider, asserted, flowStateId);
  if (created) await afterUserCreated(project.authPool, settings, created, req.ip);
  const target = redirectTarget(settings, redirectTo);
  if (outcome.kind === "code") return withParams(target, { code: outcome.code }, "query");
  const s = await sessionResponse(call, outcome.user, outcome.session, "sso/saml");
  return withParams(target, sessionFragment(s), "fragment");
}

/**
 * The asserted user found (SSO identities link only within their provider: one user per subject, never by
 * address) or made, refreshed from the assertion, and signed in: a session that ends with the provider's, or
 * the PKCE flow's code.
 */
async function signInAsserted(
  { project, req, settings }: AuthCall,
  provider: SsoProvider,
  asserted: AssertedUser,
  flowStateId: string | null,
) {
  const providerType = `sso:${provider.id}`;
  let created: UserRow | undefined;
  const outcome = await withAdminTransaction(project.authPool, async (db) => {
    const linked = await userIdOfIdentity(db, providerType, asserted.subject, { lock: true });
    let user: UserRow | undefined = linked ? await userById(db, linked) : undefined;
    if (!user) {
      if (settings.disable_signup) throw signupDisabled();
      user = await insertExternalUser(db, {
        email: asserted.email,
        confirmed: true,
        sso: true,
        provider: providerType,
        metadata: asserted.identityData,
      });
      await beforeUserCreated(project.authPool, settings, user, req.ip);
      created = user;
    } else {
      if (user.banned_until && user.banned_until.getTime() > Date.now()) {
        throw new AuthApiError(403, "user_banned", "User is banned");
      }
      // The provider is the source of truth for its users: its claims and address replace the old ones.
      await refreshSsoUser(db, user.id, asserted.email, asserted.identityData);
    }
    await linkIdentity(db, {
      provider: providerType,
      subject: asserted.subject,
      userId: user.id,
      data: asserted.identityData,
    });
    if (flowStateId) {
      const code = await issueAuthCode(db, flowStateId, user.id, { unclaimed: true });
      if (!code) throw new AuthApiError(400, "flow_state_already_used", "State has already been used");
      return { kind: "code" as const, code };
    }
    const session = await startSession(db, user.id, "sso/saml");
    await bindSsoSession(db, session.sessionId, provider.id, asserted.notAfter);
    return { kind: "session" as const, user: (await userById(db, user.id))!, session };
  });
  return { outcome, created };
}
