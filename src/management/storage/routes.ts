import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { withTransaction } from "../../db/transaction";
import { routeTable } from "../route";
import { configDocumentRoutes } from "../configDocument";
import { settingsDocument } from "../configDocument";
import { listBuckets } from "./store";
import { STORAGE_DEFAULTS, type StorageSettings } from "../../storage/config";

/** Storage configuration (stored, applied by /storage/v1 on its next request) and the project's buckets. */
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

export const STORAGE_CONFIG_READ = { permission: "storage_config_read" };

const storageStore = (ctx: AppContext) => settingsDocument(ctx, "storage", STORAGE_DEFAULTS);

/** The storage config as GET .../config/storage answers it. */
export const storageConfig = (ctx: AppContext, ref: string) => storageStore(ctx).read(ref);

export function storageRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const store = storageStore(ctx);
  configDocumentRoutes(routes, {
    path: "/v1/projects/:ref/config/storage",
    store,
    read: { summary: "Gets the storage config", access: STORAGE_CONFIG_READ },
    update: {
      method: "patch",
      summary: "Updates the storage config",
      access: { permission: "storage_config_write" },
      body: Patch,
      status: 200,
      // `features` merges into the stored features, field by field (the body may name only some).
      changes: async (body, { project }) =>
        ({
          ...body,
          ...(body.features && {
            features: { ...(await store.read(project.ref)).features, ...body.features },
          }),
        }) as Partial<StorageSettings>,
      answer: () => ({}),
    },
  });
  routes.get(
    "/v1/projects/:ref/storage/buckets",
    "Lists storage buckets",
    { project: "database", access: { permission: "storage_read", scope: "storage:read" }, status: 200 },
    async ({ project }) => {
      // Read as the project's owner, who owns the storage tables (and could have put a view in their place).
      const rows = await withTransaction(project.ownerPool, project.asOwnerScope, listBuckets);
      return rows.map((r) => ({
        ...r,
        created_at: new Date(r.created_at).toISOString(),
        updated_at: new Date(r.updated_at).toISOString(),
      }));
    },
  );
  return routes.router;
}
