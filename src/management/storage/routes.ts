import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { withTransaction } from "../../db/transaction";
import { routeTable } from "../route";
import { readSettings, writeSettings } from "../settings";
import { STORAGE_DEFAULTS } from "../../storage/config";

/** Storage configuration (stored, applied by /storage/v1 on its next request) and the project's buckets. */
const DEFAULTS = STORAGE_DEFAULTS;
const Patch = z
  .object({
    fileSizeLimit: z
      .number()
      .int()
      .min(0)
      .max(500 * 1024 ** 3),
    features: z.record(z.string(), z.unknown()),
    external: z.object({ upstreamTarget: z.enum(["main", "canary"]) }),
  })
  .partial()
  .strict();

export function storageRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const path = "/v1/projects/:ref/config/storage";
  routes.get(
    path,
    "Gets the storage config",
    { access: { permission: "storage_config_read" }, status: 200 },
    async ({ project }) => readSettings(ctx, project.ref, "storage", DEFAULTS),
  );
  routes.patch(
    path,
    "Updates the storage config",
    { access: { permission: "storage_config_write" }, body: Patch, status: 200 },
    async ({ project, params, body }) => {
      const current = await readSettings(ctx, project.ref, "storage", DEFAULTS);
      const features = body.features ? { ...current.features, ...body.features } : undefined;
      await writeSettings(ctx, params.ref, "storage", DEFAULTS, {
        ...body,
        ...(features ? { features } : {}),
      } as Partial<typeof DEFAULTS>);
      return {};
    },
  );
  routes.get(
    "/v1/projects/:ref/storage/buckets",
    "Lists storage buckets",
    { project: "database", access: { permission: "storage_read", scope: "storage:read" }, status: 200 },
    async ({ project }) => {
      // Read as the project's owner, who owns the storage tables (and could have put a view in their place).
      const rows = await withTransaction(project.ownerPool, project.asOwnerScope, async (client) => {
        const exists = await client.query("select to_regclass('storage.buckets') is not null as present");
        if (!exists.rows[0].present) return [];
        return (
          await client.query(
            "select id::text, name, coalesce(owner::text, '') as owner, created_at, updated_at, coalesce(public, false) as public from storage.buckets order by name",
          )
        ).rows;
      });
      return rows.map((r) => ({
        ...r,
        created_at: new Date(r.created_at).toISOString(),
        updated_at: new Date(r.updated_at).toISOString(),
      }));
    },
  );
  return routes.router;
}
