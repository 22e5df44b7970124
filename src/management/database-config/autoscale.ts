import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { readSettings, writeSettings } from "../../projects/settings";

/**
 * Disk autoscaling, as on the platform: once the database uses GROW_AT of its disk, the disk grows by
 * `growth_percent` of its size, at least `min_increment_gb`, up to `max_size_gb` (and the volume), instead of
 * the project going read-only at 95 %. Off unless the project's config turns it on (`enabled`, Strata's
 * own field: a self-hosted disk is fixed unless its operator says otherwise). A grown disk never shrinks:
 * its size is kept beside the disk config (`disk_autoscaled`), and it may pass `PROJECT_DISK_QUOTA_MB`, the
 * starting size it grows from.
 */

/** Share of the disk at which it grows (the platform's 90 %, before read-only mode's 95 %). */
export const GROW_AT = 0.9;
const GIB = 1024 ** 3;

export const AUTOSCALE_DEFAULTS = {
  growth_percent: 50,
  min_increment_gb: 4,
  max_size_gb: 60,
  enabled: false,
};
export type Autoscale = typeof AUTOSCALE_DEFAULTS;
export const GROWN_DEFAULTS = { size_bytes: 0, grown_at: "" };

export const AutoscaleBody = z
  .object({
    growth_percent: z.number().int().min(0).max(1000).optional(),
    min_increment_gb: z.number().int().min(0).max(16_384).optional(),
    max_size_gb: z.number().int().min(1).max(65_536).optional(),
    enabled: z.boolean().optional(),
  })
  .strict();

export const AutoscaleAnswer = z.object({
  growth_percent: z.number().int(),
  min_increment_gb: z.number().int(),
  max_size_gb: z.number().int(),
  enabled: z.boolean().describe("Strata's own: whether the disk grows instead of going read-only"),
});

export async function readAutoscale(ctx: AppContext, ref: string): Promise<Autoscale> {
  return readSettings(ctx, ref, "disk_autoscale", AUTOSCALE_DEFAULTS);
}

/** Validates the merged config (one that could never grow is refused) and stores it. */
export async function writeAutoscale(
  ctx: AppContext,
  ref: string,
  patch: z.infer<typeof AutoscaleBody>,
  diskSizeGb: number,
): Promise<Autoscale> {
  const next = { ...(await readAutoscale(ctx, ref)), ...patch };
  if (next.enabled && next.growth_percent === 0 && next.min_increment_gb === 0)
    throw new HttpError(
      400,
      "growth_percent and min_increment_gb cannot both be 0: the disk would never grow",
    );
  if (next.max_size_gb < diskSizeGb)
    throw new HttpError(
      400,
      `max_size_gb (${next.max_size_gb}) must be at least the disk's size_gb (${diskSizeGb})`,
    );
  return writeSettings(ctx, ref, "disk_autoscale", AUTOSCALE_DEFAULTS, next);
}

/** The size a disk of `sizeBytes` grows to (itself when it cannot grow: at the max or the volume). */
export function grownDiskSize(sizeBytes: number, config: Autoscale, volumeBytes: number): number {
  const wanted = Math.max(
    Math.floor(sizeBytes * (1 + config.growth_percent / 100)),
    sizeBytes + config.min_increment_gb * GIB,
  );
  return Math.max(sizeBytes, Math.min(wanted, config.max_size_gb * GIB, volumeBytes));
}

/** The size the project's disk has grown to by autoscaling (0: never grown). */
export async function grownSize(ctx: AppContext, ref: string): Promise<number> {
  return (await readSettings(ctx, ref, "disk_autoscaled", GROWN_DEFAULTS)).size_bytes;
}

/**
 * Grows the project's disk while it is past GROW_AT and autoscaling is on and can still grow it. Answers
 * whether it grew (the caller measures again).
 */
export async function autoscaleDisk(
  ctx: AppContext,
  ref: string,
  usage: { sizeBytes: number; usedBytes: number; volumeBytes: number },
): Promise<boolean> {
  if (usage.usedBytes < usage.sizeBytes * GROW_AT) return false;
  const config = await readAutoscale(ctx, ref);
  if (!config.enabled) return false;
  let size = usage.sizeBytes;
  while (usage.usedBytes >= size * GROW_AT) {
    const next = grownDiskSize(size, config, usage.volumeBytes);
    if (next <= size) break;
    size = next;
  }
  if (size <= usage.sizeBytes) return false;
  await writeSettings(ctx, ref, "disk_autoscaled", GROWN_DEFAULTS, {
    size_bytes: size,
    grown_at: new Date().toISOString(),
  });
  ctx.log.info({ ref, fromBytes: usage.sizeBytes, toBytes: size }, "disk autoscaled");
  return true;
}
