import { randomUUID } from "node:crypto";
import { z } from "zod";
import { withAdminTransaction } from "../../db/transaction";
import type { AuthCall } from "../call";
import { AuthApiError } from "../errors";
import { parse, pkceOf } from "../input";
import { identityProvider, refreshedProvider, requireSaml, serviceProvider } from "../samlProvider";
import { startFlow } from "../store/flowState";
import { clearStaleRelayStates, insertRelayState, ssoProviders } from "../store/saml";

/**
 * SAML 2.0 single sign-on (auth-js signInWithSSO) through the providers registered with the Management API,
 * as the platform's auth server serves it: `POST /sso` answers the identity provider's URL with a signed
 * AuthnRequest (HTTP-Redirect binding), the identity provider's signed answer comes to `POST /sso/saml/acs`
 * (handlers/samlAcs.ts), and `GET /sso/saml/metadata` is this service provider's metadata.
 */

const ssoBody = z.object({
  provider_id: z.string().uuid().nullish(),
  domain: z.string().nullish(),
  redirect_to: z.string().nullish(),
  skip_http_redirect: z.boolean().nullish(),
  code_challenge: z.string().nullish(),
  code_challenge_method: z.string().nullish(),
  gotrue_meta_security: z.unknown().optional(),
});

/** POST /sso: the provider of `provider_id` or `domain`, and a signed AuthnRequest to it. */
export async function startSso({ project, req, res, settings, apiUrl }: AuthCall) {
  requireSaml(settings);
  const body = parse(ssoBody, req.body);
  if (body.provider_id && body.domain) {
    throw new AuthApiError(400, "validation_failed", "Only one of provider_id or domain supported");
  }
  if (!body.provider_id && !body.domain) {
    throw new AuthApiError(400, "validation_failed", "A provider_id or domain needs to be provided");
  }
  const items = await ssoProviders(project.platformPool, project.ref);
  const domain = body.domain?.trim().toLowerCase();
  const provider = body.provider_id
    ? items.find((p) => p.id === body.provider_id)
    : items.find((p) => p.domains.some((d) => d.domain.toLowerCase() === domain));
  if (!provider) {
    throw new AuthApiError(
      404,
      "sso_provider_not_found",
      body.provider_id ? "No such SSO provider" : "No SSO provider assigned for this domain",
    );
  }
  const pkce = pkceOf(body);
  const idp = identityProvider(await refreshedProvider(project, provider));
  const relayStateId = randomUUID();
  const sp = await serviceProvider(
    { project, settings, apiUrl },
    { relayState: relayStateId, nameIdFormat: provider.saml.name_id_format },
  );
  let request: { id: string; context: string };
  try {
    request = sp.createLoginRequest(idp, "redirect");
  } catch {
    throw new AuthApiError(
      500,
      "unexpected_failure",
      "Error creating SAML Authentication Request: the identity provider has no HTTP-Redirect sign-on service",
    );
  }
  await withAdminTransaction(project.authPool, async (db) => {
    await clearStaleRelayStates(db);
    const flowStateId = pkce
      ? await startFlow(db, {
          challenge: pkce.codeChallenge,
          challengeMethod: pkce.method,
          providerType: "sso/saml",
          authenticationMethod: "sso/saml",
        })
      : null;
    await insertRelayState(db, {
      id: relayStateId,
      providerId: provider.id,
      requestId: request.id,
      redirectTo: body.redirect_to ?? null,
      flowStateId,
    });
  });
  if (body.skip_http_redirect) return { url: request.context };
  res.redirect(303, request.context);
}

/** GET /sso/saml/metadata: this service provider's metadata (entity id = its URL), for the identity provider. */
export async function metadata({ project, req, res, settings, apiUrl }: AuthCall) {
  requireSaml(settings);
  const sp = await serviceProvider(
    { project, settings, apiUrl },
    { encryption: settings.saml_allow_encrypted_assertions === true },
  );
  res.set("Content-Type", "application/xml");
  res.set("Cache-Control", "public, max-age=600");
  if (req.query.download === "true") res.set("Content-Disposition", 'attachment; filename="metadata.xml"');
  res.status(200).send(sp.getMetadata());
}
