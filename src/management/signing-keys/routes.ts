import { randomUUID } from "node:crypto";
import { Router } from "express";
import type { JWK } from "jose";
import { z } from "zod";
import type { AppContext } from "../../context";
import {
  checkPrivateJwk,
  generatePrivateJwk,
  publicJwkOf,
  SIGNING_ALGORITHMS,
  type SigningKeyRow,
} from "../../auth/signingKeys";
import { found, HttpError } from "../http";
import { routeTable } from "../route";
import {
  deleteSigningKey,
  getSigningKey,
  insertSigningKey,
  legacySigningKey,
  listSigningKeys,
  setSigningKeyStatus,
} from "./store";

const READ = { permission: "auth_signing_keys_read", scope: "secrets:read" };
const WRITE = { permission: "auth_signing_keys_write", scope: "secrets:write" };

/** A signing key as the API shows it: never its private half. */
function toSigningKey(row: SigningKeyRow) {
  return {
    id: row.id,
    algorithm: row.algorithm,
    status: row.status,
    public_jwk: row.public_jwk,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** Signing keys: the keys that sign and verify the project's JWTs (JWKS publishes their public halves). */
export function signingKeyRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const pool = ctx.platformPool;
  const base = "/v1/projects/:ref/config/auth/signing-keys";
  const signingKey = async (ref: string, id: string) =>
    found(await getSigningKey(pool, ref, id), "Signing key", id);

  routes.get(base, "Lists the project's signing keys", { access: READ, status: 200 }, async ({ params }) => {
    return { keys: (await listSigningKeys(pool, params.ref)).map(toSigningKey) };
  });

  routes.post(
    base,
    "Creates a signing key (generated, or imported from private_jwk); standby unless a status is given",
    {
      access: WRITE,
      body: z.object({
        algorithm: z.enum(SIGNING_ALGORITHMS),
        status: z.enum(["in_use", "standby"]).default("standby"),
        private_jwk: z.looseObject({ kty: z.string() }).optional(),
      }),
      status: 201,
    },
    async ({ params, body }) => {
      let privateJwk = body.private_jwk as JWK | undefined;
      if (privateJwk) {
        await checkPrivateJwk(body.algorithm, privateJwk).catch((e) => {
          throw new HttpError(400, `Invalid private_jwk: ${(e as Error).message}`);
        });
      } else {
        privateJwk = await generatePrivateJwk(body.algorithm);
      }
      const id = randomUUID();
      const row = await insertSigningKey(pool, params.ref, {
        id,
        algorithm: body.algorithm,
        status: body.status,
        privateJwk,
        publicJwk: publicJwkOf(privateJwk, id, body.algorithm),
      });
      return toSigningKey(row);
    },
  );

  routes.get(
    `${base}/legacy`,
    "The signing key registered from the project's JWT secret",
    { access: READ, status: 200 },
    async ({ params }) => {
      const row = await legacySigningKey(pool, params.ref);
      if (!row) throw new HttpError(404, "The JWT secret is not registered as a signing key");
      return toSigningKey(row);
    },
  );

  routes.post(
    `${base}/legacy`,
    "Registers the project's JWT secret as an in_use HS256 signing key",
    { access: WRITE, status: 201 },
    async ({ project, params }) => {
      const existing = await legacySigningKey(pool, params.ref);
      if (existing) return toSigningKey(existing);
      const secret = Buffer.from(project.record.jwtSecret).toString("base64url");
      const row = await insertSigningKey(pool, params.ref, {
        id: randomUUID(),
        algorithm: "HS256",
        status: "in_use",
        privateJwk: { kty: "oct", k: secret },
        publicJwk: null,
        isLegacy: true,
      });
      return toSigningKey(row);
    },
  );

  routes.get(`${base}/:id`, "Gets a signing key", { access: READ, status: 200 }, async ({ params }) => {
    return toSigningKey(await signingKey(params.ref, params.id));
  });

  routes.patch(
    `${base}/:id`,
    "Changes a signing key's status; in_use makes the previous in_use key previously_used",
    {
      access: WRITE,
      body: z.object({ status: z.enum(["in_use", "standby", "previously_used", "revoked"]) }),
      status: 200,
    },
    async ({ params, body }) => {
      const row = await signingKey(params.ref, params.id);
      if (row.status === "revoked" && body.status !== "revoked") {
        throw new HttpError(400, "A revoked signing key cannot be used again");
      }
      return toSigningKey(
        found(await setSigningKeyStatus(pool, params.ref, params.id, body.status), "Signing key", params.id),
      );
    },
  );

  routes.delete(
    `${base}/:id`,
    "Deletes a signing key that has been revoked for a while",
    { access: WRITE, status: 200 },
    async ({ params }) => {
      const row = await signingKey(params.ref, params.id);
      const wait = ctx.config.signingKeyDeleteAfterSeconds * 1000;
      if (row.status !== "revoked" || !row.revoked_at || Date.now() - row.revoked_at.getTime() < wait) {
        throw new HttpError(
          409,
          `A signing key can be deleted only after it has been revoked for ${ctx.config.signingKeyDeleteAfterSeconds} seconds`,
        );
      }
      await deleteSigningKey(pool, params.ref, params.id);
      return toSigningKey(row);
    },
  );

  return routes.router;
}
