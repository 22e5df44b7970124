import { Router } from "express";
import type pg from "pg";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { routeTable } from "../route";
import { decryptSecret, digestOf, encryptSecret } from "../../platform/secrets";
import {
  deleteSecrets,
  listSecretDigests,
  lockSecrets,
  rootKeyOf,
  setCiphertext,
  setRootKey,
  upsertSecret,
} from "./store";
import { withAdminTransaction } from "../../db/transaction";
import { functionRuntimeOf } from "../../functions/runtime";

/** Project secrets (encrypted at rest) and the root key they are encrypted under (`sodium`/`pgsodium`). */

const SecretName = z
  .string()
  .min(1, "must not be empty")
  .max(256, "must be at most 256 characters")
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]*$/,
    "must start with a letter or underscore and hold only letters, digits and underscores",
  )
  .refine((n) => !n.toUpperCase().startsWith("SUPABASE_"), "must not start with SUPABASE_ (reserved)");

const SecretsBody = z
  .array(z.object({ name: SecretName, value: z.string().max(24 * 1024, "must be at most 24 KiB") }))
  .min(1, "must list at least one secret");

/** Re-encrypts every secret of the project under `newKey`, in the caller's transaction; 409 if one will not open. */
async function reencryptSecrets(client: pg.PoolClient, ref: string, newKey: string): Promise<void> {
  const oldKey = await rootKeyOf(client, ref);
  for (const row of await lockSecrets(client, ref)) {
    let value: string;
    try {
      value = decryptSecret(oldKey, row.ciphertext);
    } catch {
      throw new HttpError(
        409,
        `Secret ${row.name} cannot be decrypted with the current root key; the root key was not changed`,
      );
    }
    await setCiphertext(client, ref, row.name, encryptSecret(newKey, value));
  }
}

export function secretRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const read = { permission: "edge_functions_secrets_read", scope: "secrets:read" };
  const write = { permission: "edge_functions_secrets_write", scope: "secrets:write" };

  routes.get(
    "/v1/projects/:ref/secrets",
    "Lists secrets (values as SHA-256 digests)",
    { access: read, status: 200 },
    async ({ project }) => {
      const secrets = await listSecretDigests(ctx.platformPool, project.ref);
      return secrets.map((r) => ({ ...r, updated_at: new Date(r.updated_at).toISOString() }));
    },
  );

  routes.post(
    "/v1/projects/:ref/secrets",
    "Creates or replaces secrets in bulk",
    { access: write, body: SecretsBody, status: 201 },
    async ({ project, body }) => {
      await withAdminTransaction(ctx.platformPool, async (client) => {
        const key = await rootKeyOf(client, project.ref);
        for (const { name, value } of body)
          await upsertSecret(client, project.ref, {
            name,
            ciphertext: encryptSecret(key, value),
            digest: digestOf(value),
          });
      });
      functionRuntimeOf(ctx).deployed.forget(project.ref);
      return {};
    },
  );

  routes.delete(
    "/v1/projects/:ref/secrets",
    "Deletes secrets by name",
    {
      access: write,
      body: z.array(z.string().min(1)).min(1, "must list at least one secret name"),
      status: 200,
    },
    async ({ project, body }) => {
      await deleteSecrets(ctx.platformPool, project.ref, body);
      functionRuntimeOf(ctx).deployed.forget(project.ref);
      return {};
    },
  );

  for (const spelling of ["sodium", "pgsodium"]) {
    const admin = { permission: "project_admin_write" };
    routes.get(
      `/v1/projects/:ref/${spelling}`,
      "Gets the root key secrets are encrypted under",
      { access: { ...admin, scope: "secrets:read" }, status: 200 },
      async ({ project }) => {
        return { root_key: await rootKeyOf(ctx.platformPool, project.ref) };
      },
    );
    routes.put(
      `/v1/projects/:ref/${spelling}`,
      "Replaces the root key, re-encrypting every secret in one transaction",
      {
        access: { ...admin, scope: "secrets:write" },
        body: z.object({ root_key: z.string().min(32, "must be at least 32 characters").max(512) }),
        status: 200,
      },
      async ({ project, body }) => {
        await withAdminTransaction(ctx.platformPool, async (client) => {
          await reencryptSecrets(client, project.ref, body.root_key);
          await setRootKey(client, project.ref, body.root_key);
        });
        return { root_key: body.root_key };
      },
    );
  }

  return routes.router;
}
