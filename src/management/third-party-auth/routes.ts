import { Router } from "express";
import type { JSONWebKeySet } from "jose";
import { z } from "zod";
import type { AppContext } from "../../context";
import { resolveJwks } from "../../auth/thirdParty";
import { HttpError } from "../http";
import { routeTable } from "../route";

const READ = { permission: "auth_config_read", scope: "auth:read" };
const WRITE = { permission: "auth_config_write", scope: "auth:write" };

const COLUMNS =
  "id, type, oidc_issuer_url, jwks_url, custom_jwks, audience, resolved_jwks, inserted_at, updated_at, resolved_at";

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

  async function one(ref: string, id: string) {
    const { rows } = await pool.query(
      `select ${COLUMNS} from platform.third_party_auth where project_ref = $1 and id::text = $2`,
      [ref, id],
    );
    if (!rows[0]) throw new HttpError(404, `Third-party auth integration ${id} not found`);
    return rows[0];
  }

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
      const resolved = await resolveJwks(source);
      const { rows } = await pool.query(
        `insert into platform.third_party_auth
           (project_ref, type, oidc_issuer_url, jwks_url, custom_jwks, resolved_jwks, resolved_at, audience)
         values ($1, $2, $3, $4, $5, $6, case when $6::jsonb is null then null else now() end, $7)
         returning ${COLUMNS}`,
        [
          params.ref,
          typeOf(body),
          source.oidc_issuer_url,
          source.jwks_url,
          source.custom_jwks && JSON.stringify(source.custom_jwks),
          resolved && JSON.stringify(resolved),
          body.audience ?? null,
        ],
      );
      return rows[0];
    },
  );

  routes.get(
    base,
    "Lists third-party auth integrations",
    { access: READ, status: 200 },
    async ({ params }) => {
      const { rows } = await pool.query(
        `select ${COLUMNS} from platform.third_party_auth where project_ref = $1 order by inserted_at`,
        [params.ref],
      );
      return rows;
    },
  );

  routes.get(
    `${base}/:tpa_id`,
    "Gets a third-party auth integration",
    { access: READ, status: 200 },
    async ({ params }) => {
      return one(params.ref, params.tpa_id);
    },
  );

  routes.delete(
    `${base}/:tpa_id`,
    "Removes a third-party auth integration: its tokens are refused from the next request",
    { access: WRITE, status: 200 },
    async ({ params }) => {
      const row = await one(params.ref, params.tpa_id);
      await pool.query("delete from platform.third_party_auth where id = $1", [row.id]);
      return row;
    },
  );

  return routes.router;
}
