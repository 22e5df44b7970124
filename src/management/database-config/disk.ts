import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { configDocumentRoutes } from "../configDocument";
import { HttpError } from "../http";
import { projectCreatedAt } from "../projects/store";
import { routeTable } from "../route";
import { settingsDocument } from "../configDocument";
import { AutoscaleAnswer, AutoscaleBody, readAutoscale, writeAutoscale } from "./autoscale";
import { diskUsage, DISK_DEFAULTS } from "./readonly";

/**
 * The disk: its config (the size read-only mode's threshold and autoscaling start from), its usage measured
 * from the database and the volume, and autoscaling.
 */

const DiskAttributes = z
  .object({
    size_gb: z.number().int().min(1).max(65_536),
    type: z.enum(["gp3", "io2"]),
    iops: z.number().int().min(3000).max(256_000).optional(),
    throughput_mibps: z.number().int().min(125).max(1000).optional(),
  })
  .strict();

const DiskConfig = z.object({
  attributes: z.object({
    iops: z.number(),
    size_gb: z.number(),
    throughput_mibps: z.number(),
    type: z.string(),
  }),
  last_modified_at: z.string(),
});

const DiskUtil = z.object({
  timestamp: z.string(),
  metrics: z.object({
    fs_size_bytes: z.number(),
    fs_avail_bytes: z.number(),
    fs_used_bytes: z.number(),
  }),
});

export function diskRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const path = "/v1/projects/:ref/config/disk";
  const read = { permission: "infra_disk_config_read" };
  const write = { permission: "infra_disk_config_write" };
  const disk = settingsDocument(ctx, "disk", DISK_DEFAULTS);

  configDocumentRoutes(routes, {
    path,
    store: disk,
    read: {
      summary: "Gets the disk config (size_gb is the size read-only mode's threshold is computed from)",
      access: read,
      response: DiskConfig,
      answer: async (d, { project }) => ({
        ...d,
        last_modified_at:
          d.last_modified_at || (await projectCreatedAt(ctx.platformPool, project.ref)).toISOString(),
      }),
    },
    update: {
      method: "post",
      summary:
        "Sets the disk config; size_gb may only grow, and read-only mode's threshold (95 %) follows it at the next check",
      access: write,
      body: z.object({ attributes: DiskAttributes }).strict(),
      response: z.object({}),
      status: 201,
      changes: async (body, { project }) => {
        const current = await disk.read(project.ref);
        if (body.attributes.size_gb < current.attributes.size_gb) {
          throw new HttpError(400, `size_gb can only grow (now ${current.attributes.size_gb})`);
        }
        return {
          attributes: { ...current.attributes, ...body.attributes },
          last_modified_at: new Date().toISOString(),
        };
      },
      answer: () => ({}),
    },
  });
  routes.get(
    `${path}/util`,
    "Measures the project's disk: fs_used_bytes is the database's size, fs_size_bytes its disk (the disk " +
      "config, the installation's quota or the volume, whichever is smallest), fs_avail_bytes what is left",
    { project: "database", access: read, status: 200, response: DiskUtil },
    async ({ project }) => {
      const usage = await diskUsage(ctx, project);
      return {
        timestamp: new Date().toISOString(),
        metrics: {
          fs_size_bytes: usage.sizeBytes,
          fs_avail_bytes: usage.availBytes,
          fs_used_bytes: usage.usedBytes,
        },
      };
    },
  );
  configDocumentRoutes(routes, {
    path: `${path}/autoscale`,
    store: {
      read: (ref) => readAutoscale(ctx, ref),
      write: async (ref, changes) =>
        writeAutoscale(ctx, ref, changes, (await disk.read(ref)).attributes.size_gb),
    },
    read: {
      summary:
        "Gets disk autoscaling: growth_percent, min_increment_gb, max_size_gb, and whether it is on (enabled, Strata's own; off by default)",
      access: read,
      response: AutoscaleAnswer,
    },
    update: {
      method: "put",
      summary:
        "Sets disk autoscaling (Strata's own endpoint): with enabled, once the database uses 90 % of its disk " +
        "the disk grows by growth_percent, at least min_increment_gb, up to max_size_gb (and the volume), " +
        "instead of the project going read-only at 95 %; a grown disk may pass PROJECT_DISK_QUOTA_MB",
      access: write,
      body: AutoscaleBody,
      response: AutoscaleAnswer,
      status: 200,
    },
  });
  return routes.router;
}
