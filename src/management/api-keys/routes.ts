import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { visiblePrefix } from "../../auth/apiKeys";
import { mintLegacyKey } from "../../auth/legacyKeys";
import type { ProjectRuntime } from "../../projects/runtime";
import { found, HttpError } from "../http";
import { routeTable } from "../route";
import {
  createApiKey,
  deleteApiKey,
  getApiKey,
  listApiKeys,
  setLegacyKeysEnabled,
  updateApiKey,
  type ApiKeyRow,
} from "./store";

const READ = { permission: "api_gateway_keys_read", scope: "secrets:read" };
const WRITE = { permission: "api_gateway_keys_write", scope: "secrets:write" };

const booleanString = z.enum(["true", "false"]).transform((v) => v === "true");
const revealQuery = z.object({ reveal: booleanString.optional() });
const name = z
  .string()
  .min(4)
  .max(64)
  .regex(/^[a-z_][a-z0-9_]+$/, "must be lowercase letters, digits and underscores");
const template = z.record(z.string(), z.unknown());

function toApiKey(row: ApiKeyRow, reveal: boolean) {
  const prefix = visiblePrefix(row.type, row.secret);
  // Without reveal=true a secret key shows only its prefix.
  const hidden = row.type === "secret" && !reveal;
  return {
    id: row.id,
    type: row.type,
    name: row.name,
    description: row.description,
    api_key: hidden ? `${prefix}${"·".repeat(8)}` : row.secret,
    prefix,
    hash: null,
    secret_jwt_template: row.secret_jwt_template,
    inserted_at: row.inserted_at,
    updated_at: row.updated_at,
  };
}

/** The legacy anon and service_role keys, listed as type legacy (the service_role one masked). */
async function legacyKeys(project: ProjectRuntime, reveal: boolean) {
  const { jwtSecret, legacyKeysIat } = project.record;
  return Promise.all(
    (["anon", "service_role"] as const).map(async (role) => {
      const value = await mintLegacyKey(jwtSecret, role, legacyKeysIat);
      const hide = role === "service_role" && !reveal;
      return {
        id: role,
        type: "legacy",
        name: role,
        description: `Legacy ${role} API key`,
        api_key: hide ? `${value.slice(0, 12)}${"·".repeat(8)}` : value,
        prefix: null,
        hash: null,
        secret_jwt_template: null,
        inserted_at: null,
        updated_at: null,
      };
    }),
  );
}

/** API keys: opaque publishable/secret keys of a project, plus the legacy JWT keys and their toggle. */
export function apiKeyRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const pool = ctx.platformPool;
  const base = "/v1/projects/:ref/api-keys";

  routes.get(
    base,
    "Lists the project's API keys",
    { access: READ, query: revealQuery, status: 200 },
    async ({ project, params, query }) => {
      const reveal = query.reveal ?? false;
      const legacy = project.record.legacyKeysEnabled ? await legacyKeys(project, reveal) : [];
      return [...legacy, ...(await listApiKeys(pool, params.ref)).map((k) => toApiKey(k, reveal))];
    },
  );

  routes.get(
    `${base}/legacy`,
    "Whether the legacy JWT API keys are enabled",
    { access: READ, status: 200 },
    async ({ project }) => ({ enabled: project.record.legacyKeysEnabled }),
  );

  routes.put(
    `${base}/legacy`,
    "Enables or disables the legacy JWT API keys",
    { access: WRITE, query: z.object({ enabled: booleanString }), status: 200 },
    async ({ project, query }) => {
      await setLegacyKeysEnabled(pool, project.ref, query.enabled);
      const refreshed = await ctx.registry.refresh(project.ref);
      return { enabled: refreshed!.record.legacyKeysEnabled };
    },
  );

  routes.post(
    base,
    "Creates a publishable or secret API key",
    {
      access: WRITE,
      query: revealQuery,
      body: z.object({
        type: z.enum(["publishable", "secret"]),
        name,
        description: z.string().max(256).nullable().optional(),
        secret_jwt_template: template.optional(),
      }),
      status: 201,
    },
    async ({ params, query, body }) => {
      const row = await createApiKey(pool, params.ref, body);
      if (!row) throw new HttpError(409, `An API key named ${body.name} already exists`);
      return toApiKey(row, query.reveal ?? false);
    },
  );

  routes.get(
    `${base}/:id`,
    "Gets an API key",
    { access: READ, query: revealQuery, status: 200 },
    async ({ project, params, query }) => {
      const legacy = (await legacyKeys(project, query.reveal ?? false)).find((k) => k.id === params.id);
      if (legacy) return legacy;
      return toApiKey(
        found(await getApiKey(pool, params.ref, params.id), "API key", params.id),
        query.reveal ?? false,
      );
    },
  );

  routes.patch(
    `${base}/:id`,
    "Updates an API key's name, description or secret JWT template",
    {
      access: WRITE,
      query: revealQuery,
      body: z.object({
        name: name.optional(),
        description: z.string().max(256).nullable().optional(),
        secret_jwt_template: template.optional(),
      }),
      status: 200,
    },
    async ({ params, query, body }) => {
      const row = await updateApiKey(pool, params.ref, params.id, body).catch((e) => {
        if (e.code === "23505") throw new HttpError(409, `An API key named ${body.name} already exists`);
        throw e;
      });
      return toApiKey(found(row, "API key", params.id), query.reveal ?? false);
    },
  );

  routes.delete(
    `${base}/:id`,
    "Deletes an API key: it stops opening the data APIs on the next request",
    {
      access: WRITE,
      query: z.object({
        reveal: booleanString.optional(),
        was_compromised: booleanString.optional(),
        reason: z.string().max(1000).optional(),
      }),
      status: 200,
    },
    async ({ params, query }) => {
      if (params.id === "anon" || params.id === "service_role") {
        throw new HttpError(400, "Legacy API keys cannot be deleted; disable them with PUT api-keys/legacy");
      }
      const row = found(await deleteApiKey(pool, params.ref, params.id), "API key", params.id);
      ctx.log.info(
        { ref: params.ref, key: row.id, was_compromised: query.was_compromised },
        "API key deleted",
      );
      return toApiKey(row, query.reveal ?? false);
    },
  );

  return routes.router;
}
