import { Router } from "express";
import type { JSONWebKeySet } from "jose";
import { z } from "zod";
import type { AppContext } from "../../context";
import { resolveJwks } from "../../auth/thirdParty";
import { found } from "../http";
import { routeTable } from "../route";
import { deleteThirdPartyAuth, getThirdPartyAuth, insertThirdPartyAuth, listThirdPartyAuth } from "./store";

const READ = { permission: "auth_config_read", scope: "auth:read" };
const WRITE = { permission: "auth_config_write", scope: "auth:write" };

const httpsUrl = z.url({ protocol: /^https?$/ });
const jwks = z.object({ keys: z.array(z.looseObject({ kty: z.string() })).min(1) });

const createBody = z
  .object({
    oidc_issuer_url: httpsUrl.optional(),
    jwks_url: httpsUrl.optional(),
    custom_jwks: jwks.optional(),
    // Strata's addition: the `aud` the integration's tokens must carry.
    audience: z.string().min(1).max(256).optional(),
  })
  .refine(
    (b) => [b.oidc_issuer_url, b.jwks_url, b.custom_jwks].filter((v) => v !== undefined).length === 1,
    "give exactly one of oidc_issuer_url, jwks_url, custom_jwks",
  );

/** The integration's kind, named after how its keys are found. */
function typeOf(body: z.infer<typeof createBody>): string {
  if (body.custom_jwks) return "custom_jwks";
  return body.jwks_url ? "jwks_url" : "oidc_issuer_url";
}

/** Third-party auth: issuers whose JWTs the data APIs accept (the verifier reads these rows). */
export function thirdPartyAuthRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const pool = ctx.platformPool;
  const base = "/v1/projects/:ref/config/auth/third-party-auth";
  const one = async (ref: string, id: string) =>
    found(await getThirdPartyAuth(pool, ref, id), "Third-party auth integration", id);

  routes.post(
    base,
    "Adds a third-party auth integration (OIDC issuer, JWKS URL or custom JWKS)",
    { access: WRITE, body: createBody, status: 201 },
    async ({ params, body }) => {
      const source = {
        oidc_issuer_url: body.oidc_issuer_url ?? null,
        jwks_url: body.jwks_url ?? null,
        custom_jwks: (body.custom_jwks as JSONWebKeySet | undefined) ?? null,
      };
      return insertThirdPartyAuth(pool, params.ref, {
        type: typeOf(body),
        ...source,
        resolved_jwks: await resolveJwks(source),
        audience: body.audience ?? null,
      });
    },
  );

  routes.get(base, "Lists third-party auth integrations", { access: READ, status: 200 }, async ({ params }) =>
    listThirdPartyAuth(pool, params.ref),
  );

  routes.get(
    `${base}/:tpa_id`,
    "Gets a third-party auth integration",
    { access: READ, status: 200 },
    async ({ params }) => one(params.ref, params.tpa_id),
  );

  routes.delete(
    `${base}/:tpa_id`,
    "Removes a third-party auth integration: its tokens are refused from the next request",
    { access: WRITE, status: 200 },
    async ({ params }) => {
      const row = await one(params.ref, params.tpa_id);
      await deleteThirdPartyAuth(pool, row.id);
      return row;
    },
  );

  return routes.router;
}
