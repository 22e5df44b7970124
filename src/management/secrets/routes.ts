import { Router } from "express";
import type pg from "pg";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { routeTable } from "../route";
import { kekOf } from "../../platform/kek";
import { decryptSecret, digestOf, encryptSecret, newRootKey } from "./crypto";
import { withAdminTransaction } from "../../db/transaction";

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

const ROOT_KEY = "platform.project_root_keys.root_key";

/** The project's root key (stored sealed with the installation's key), created on first use. */
async function rootKeyOf(client: pg.Pool | pg.PoolClient, ref: string): Promise<string> {
  const { rows } = await client.query(
    `insert into platform.project_root_keys (project_ref, root_key) values ($1, $2)
     on conflict (project_ref) do update set project_ref = excluded.project_ref returning root_key`,
    [ref, kekOf(client).seal(newRootKey(), ROOT_KEY)],
  );
  return kekOf(client).open(rows[0].root_key, ROOT_KEY);
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
      const { rows } = await ctx.platformPool.query(
        "select name, value_digest as value, updated_at from platform.project_secrets where project_ref = $1 order by name",
        [project.ref],
      );
      return rows.map((r) => ({ ...r, updated_at: new Date(r.updated_at).toISOString() }));
    },
  );

  routes.post(
    "/v1/projects/:ref/secrets",
    "Creates or replaces secrets in bulk",
    { access: write, body: SecretsBody, status: 201 },
    async ({ project, body }) => {
      await withAdminTransaction(ctx.platformPool, async (client) => {
        const key = await rootKeyOf(client, project.ref);
        for (const { name, value } of body) {
          await client.query(
            `insert into platform.project_secrets (project_ref, name, ciphertext, value_digest) values ($1, $2, $3, $4)
             on conflict (project_ref, name) do update set ciphertext = excluded.ciphertext, value_digest = excluded.value_digest, updated_at = now()`,
            [project.ref, name, encryptSecret(key, value), digestOf(value)],
          );
        }
      });
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
      await ctx.platformPool.query(
        "delete from platform.project_secrets where project_ref = $1 and name = any($2)",
        [project.ref, body],
      );
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
          const oldKey = await rootKeyOf(client, project.ref);
          const { rows } = await client.query(
            "select name, ciphertext from platform.project_secrets where project_ref = $1 for update",
            [project.ref],
          );
          for (const row of rows) {
            let value: string;
            try {
              value = decryptSecret(oldKey, row.ciphertext);
            } catch {
              throw new HttpError(
                409,
                `Secret ${row.name} cannot be decrypted with the current root key; the root key was not changed`,
              );
            }
            await client.query(
              "update platform.project_secrets set ciphertext = $3 where project_ref = $1 and name = $2",
              [project.ref, row.name, encryptSecret(body.root_key, value)],
            );
          }
          await client.query(
            "update platform.project_root_keys set root_key = $2, updated_at = now() where project_ref = $1",
            [project.ref, kekOf(client).seal(body.root_key, ROOT_KEY)],
          );
        });
        return { root_key: body.root_key };
      },
    );
  }

  return routes.router;
}
