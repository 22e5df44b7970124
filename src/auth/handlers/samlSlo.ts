import { inflateRawSync } from "node:zlib";
import { z } from "zod";
import { noteRefusal } from "../authLogs";
import type { AuthCall, SessionCall } from "../call";
import { AuthApiError } from "../errors";
import { parse } from "../input";
import { redirectTarget } from "../redirects";
import { identityProvider, refreshedProvider, requireSaml, serviceProvider } from "../samlProvider";
import { userIdOfIdentity } from "../store/identities";
import { recordConsumedIds, ssoProviders, type SsoProvider } from "../store/saml";
import { endProviderSessions, endSessions, ssoProviderOfSession } from "../store/sessions";

/**
 * SAML single logout. SP-initiated: POST /sso/saml/logout ends the caller's SSO session at once and answers
 * the URL of a signed LogoutRequest to the identity provider's SingleLogoutService (HTTP-Redirect), which the
 * browser follows; the provider's LogoutResponse comes back to /sso/saml/slo and sends the browser on.
 * IdP-initiated: a LogoutRequest signed by a registered provider at /sso/saml/slo (HTTP-Redirect or POST)
 * ends every session of the user it names that was signed in through that provider, and is answered with a
 * signed LogoutResponse.
 */

const logoutBody = z.object({ redirect_to: z.string().optional() });

/** A provider's LogoutRequest is taken within 5 minutes (and a minute of clock difference) of its IssueInstant. */
const LOGOUT_REQUEST_WINDOW_MS = 6 * 60_000;

/**
 * Replay protection of a provider's LogoutRequest: issued within the window, and taken once (its ID kept in
 * the control plane, with the SAML responses', until the window ends).
 */
async function takeLogoutRequest(
  call: AuthCall,
  extract: { request?: { id?: string; issueInstant?: string } },
) {
  const id = extract.request?.id;
  const issued = Date.parse(extract.request?.issueInstant ?? "");
  if (!id || !Number.isFinite(issued) || Math.abs(Date.now() - issued) > LOGOUT_REQUEST_WINDOW_MS) {
    return false;
  }
  const { project } = call;
  const until = new Date(issued + LOGOUT_REQUEST_WINDOW_MS);
  return (await recordConsumedIds(project.platformPool, project.ref, [["logout_request", id]], until)) === 1;
}

/** The signed-in user's subject at the provider (the NameID its assertions named). */
async function subjectAt(call: SessionCall, provider: SsoProvider): Promise<string | undefined> {
  const { rows } = await call.project.authPool.query(
    "select provider_id from auth.identities where user_id = $1 and provider = $2",
    [call.caller.user.id, `sso:${provider.id}`],
  );
  return rows[0]?.provider_id;
}

async function entitiesOf(call: AuthCall, provider: SsoProvider) {
  const { project } = call;
  const idp = identityProvider(await refreshedProvider(project, provider));
  const sp = await serviceProvider(call);
  return { sp, idp };
}

/** POST /sso/saml/logout: the caller's SSO session ended; `{url}` of the provider's logout when it has one. */
export async function startLogout(call: SessionCall) {
  const { project, req, settings, caller } = call;
  requireSaml(settings);
  const providerId = await ssoProviderOfSession(project.authPool, caller.sessionId);
  const provider = (await ssoProviders(project.platformPool, project.ref)).find((p) => p.id === providerId);
  if (!provider)
    throw new AuthApiError(400, "validation_failed", "The session was not signed in with SAML SSO");
  const relayState = redirectTarget(settings, parse(logoutBody, req.body ?? {}).redirect_to);
  const subject = await subjectAt(call, provider);
  await endSessions(project.authPool, caller.user.id, caller.sessionId, "local");
  const { sp, idp } = await entitiesOf(call, provider);
  if (!subject || !idp.entityMeta.getSingleLogoutService("redirect")) return {};
  const { context } = sp.createLogoutRequest(idp, "redirect", { logoutNameID: subject }, relayState);
  return { url: context };
}

/** The XML of a message as its binding carries it: deflated then base64 (redirect), or base64 (post). */
function messageXml(value: string, redirect: boolean): string {
  try {
    const bytes = Buffer.from(value, "base64");
    return (redirect ? inflateRawSync(bytes) : bytes).toString("utf8");
  } catch {
    throw new AuthApiError(400, "validation_failed", "SAML message is not valid");
  }
}

/** GET or POST /sso/saml/slo: a provider's LogoutRequest (its user's sessions end) or LogoutResponse. */
export async function slo(call: AuthCall) {
  const { project, req, res, settings } = call;
  requireSaml(settings);
  const redirect = req.method === "GET";
  const params = (redirect ? req.query : (req.body ?? {})) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  const request = str(params.SAMLRequest);
  const response = str(params.SAMLResponse);
  const relayState = str(params.RelayState);
  if (!request && !response) {
    throw new AuthApiError(400, "validation_failed", "SAMLRequest or SAMLResponse is missing");
  }
  const xml = messageXml(request || response, redirect);
  const issuer = /<(?:\w+:)?Issuer\b[^>]*>\s*([^<\s]+)\s*<\/(?:\w+:)?Issuer>/.exec(xml)?.[1];
  const provider = (await ssoProviders(project.platformPool, project.ref)).find(
    (p) => p.saml.entity_id === issuer,
  );
  if (!provider) {
    throw new AuthApiError(
      404,
      "saml_idp_not_found",
      "A SAML connection has not been established with this Identity Provider",
    );
  }
  const { sp, idp } = await entitiesOf(call, provider);
  // The redirect binding's signature covers the query as sent, without the signature itself.
  const octetString = (req.originalUrl.split("?")[1] ?? "")
    .split("&")
    .filter((part) => !part.startsWith("Signature="))
    .join("&");
  const message = redirect ? { query: params, octetString } : { body: params };
  const refused = (what: string) => {
    const e = new AuthApiError(400, "validation_failed", `SAML ${what} is not valid`);
    noteRefusal(res, e);
    return e;
  };
  if (request) {
    const parsed = await sp.parseLogoutRequest(idp, redirect ? "redirect" : "post", message).catch(() => {
      throw refused("LogoutRequest");
    });
    const extract = parsed.extract as { nameID?: string; request?: { id?: string; issueInstant?: string } };
    if (!(await takeLogoutRequest(call, extract))) throw refused("LogoutRequest");
    const nameID = extract.nameID;
    const userId = nameID
      ? await userIdOfIdentity(project.authPool, `sso:${provider.id}`, nameID)
      : undefined;
    if (userId) await endProviderSessions(project.authPool, userId, provider.id);
    const { context } = sp.createLogoutResponse(idp, { extract: parsed.extract }, "redirect", relayState);
    return res.redirect(302, context);
  }
  await sp.parseLogoutResponse(idp, redirect ? "redirect" : "post", message).catch(() => {
    throw refused("LogoutResponse");
  });
  return res.redirect(303, redirectTarget(settings, relayState));
}
