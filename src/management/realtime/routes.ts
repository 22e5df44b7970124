import { Router } from "express";
import { z } from "zod";
import { REALTIME_DEFAULTS } from "../../catalog/realtimeConfig";
import type { AppContext } from "../../context";
import { routeTable } from "../route";
import { configDocumentRoutes } from "../configDocument";
import { settingsDocument } from "../configDocument";

/** Realtime configuration, read by realtime on every connect and join (src/catalog/realtimeConfig.ts). */
const int = z.number().int().min(0);
const Patch = z
  .object({
    private_only: z.boolean(),
    connection_pool: int.min(1).max(100),
    max_concurrent_users: int.min(1),
    max_events_per_second: int.min(1),
    max_bytes_per_second: int.min(1),
    max_channels_per_client: int.min(1),
    max_joins_per_second: int.min(1),
    max_presence_events_per_second: int.min(1),
    max_payload_size_in_kb: int.min(1),
    suspend: z.boolean(),
    presence_enabled: z.boolean(),
  })
  .partial()
  .strict();

export const REALTIME_CONFIG_READ = { permission: "realtime_config_read" };

const realtimeStore = (ctx: AppContext) => settingsDocument(ctx, "realtime", REALTIME_DEFAULTS);

/** The realtime config as GET .../config/realtime answers it. */
export const realtimeConfig = (ctx: AppContext, ref: string) => realtimeStore(ctx).read(ref);

export function realtimeRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const path = "/v1/projects/:ref/config/realtime";
  configDocumentRoutes(routes, {
    path,
    store: realtimeStore(ctx),
    read: { summary: "Gets the realtime config", access: REALTIME_CONFIG_READ },
    update: {
      method: "patch",
      summary: "Updates the realtime config",
      access: { permission: "realtime_config_write" },
      body: Patch,
      status: 204,
      answer: (_doc, { project }) => ctx.realtime?.forgetConfig(project.ref),
    },
  });
  routes.post(
    `${path}/shutdown`,
    "Shuts down the project's realtime connections",
    { access: { permission: "realtime_config_write" }, status: 204 },
    async ({ project }) => {
      await ctx.realtime?.shutdown(project);
      return undefined;
    },
  );
  return routes.router;
}
