import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError, requireInstallationAdmin } from "../http";
import { routeTable } from "../route";
import { requireFeature } from "../billing/plans";
import { pitrDays } from "../billing/routes";
import { configDocumentRoutes } from "../configDocument";
import { projectCreatedAt } from "../projects/store";
import { settingsDocument } from "../configDocument";
import type { PhysicalBackupRow } from "../../jobs/backups/physical";
import { DEFAULT_SCHEDULE, type BackupRow, type BackupService } from "../../jobs/backups/service";

const BackupItem = z.object({
  id: z.number().int(),
  is_physical_backup: z
    .boolean()
    .describe("a base backup of the whole embedded cluster (WAL replay starts from it), else a logical one"),
  status: z.enum(["RUNNING", "COMPLETED", "FAILED"]),
  inserted_at: z.string().describe("when the backup's snapshot was taken (its start while RUNNING)"),
  kind: z.enum(["manual", "scheduled", "pre_restore"]),
  progress: z.number().int().describe("percent done"),
  size_bytes: z.number().int().nullable(),
  completed_at: z.string().nullable(),
  error: z.string().nullable(),
});
const Backups = z.object({
  region: z.string(),
  walg_enabled: z.boolean(),
  archiver_enabled: z.boolean(),
  pitr_enabled: z.boolean(),
  backups: z.array(BackupItem),
  physical_backup_data: z
    .object({
      earliest_physical_backup_date_unix: z.number().int().optional(),
      latest_physical_backup_date_unix: z.number().int().optional(),
    })
    .describe(
      "what restore-pitr reaches by WAL replay: from the oldest base backup to the last archived WAL segment " +
        "(restore-pitr archives the current one first); empty without a base backup",
    ),
});
const Schedule = z.object({ schedule_for: z.string(), updated_at: z.string() });
const Restore = z.object({
  id: z.number().int(),
  backup_id: z.number().int().nullable(),
  status: z.enum(["RUNNING", "COMPLETED", "FAILED"]),
  progress: z.number().int(),
  error: z.string().nullable(),
  recovery_time_target: z.string(),
  method: z
    .enum(["wal_replay", "logical_backup"])
    .describe("WAL replay from a base backup to the target second, or the latest logical backup before it"),
  physical_backup_id: z.number().int().nullable(),
  started_at: z.string(),
  finished_at: z.string().nullable(),
});

type BackupFields = Pick<BackupRow & PhysicalBackupRow, "id" | "status" | "kind" | "size_bytes" | "error">;

/** A backup in the list's shape; `physical` and the times are what set the two kinds apart. */
function backupItem(
  row: BackupFields,
  what: { physical: boolean; takenAt: Date; progress: number; completedAt: Date | null },
): z.infer<typeof BackupItem> {
  return {
    id: Number(row.id),
    is_physical_backup: what.physical,
    status: row.status as "COMPLETED",
    inserted_at: what.takenAt.toISOString(),
    kind: row.kind as "manual",
    progress: what.progress,
    size_bytes: row.size_bytes === null ? null : Number(row.size_bytes),
    completed_at: what.completedAt?.toISOString() ?? null,
    error: row.error,
  };
}

const physicalItem = (row: PhysicalBackupRow) =>
  backupItem(row, {
    physical: true,
    takenAt: row.consistent_at ?? row.inserted_at,
    progress: row.status === "COMPLETED" ? 100 : 0,
    completedAt: row.consistent_at,
  });

const item = (row: BackupRow) =>
  backupItem(row, {
    physical: false,
    takenAt: row.taken_at ?? row.inserted_at,
    progress: row.progress,
    completedAt: row.completed_at,
  });

const unix = (d: Date | undefined) => (d ? Math.floor(d.getTime() / 1000) : undefined);

/** How often the backup schedule may change (spec: 3 times per 24 hours). */
const SCHEDULE_CHANGES_PER_DAY = 3;

export function backupRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/database/backups";
  const service = (): BackupService => {
    if (!ctx.backups) throw new HttpError(503, "Backups are not available in this process");
    return ctx.backups;
  };
  const read = { permission: "backups_read", scope: "database:read" };
  const write = { permission: "backups_write", scope: "database:write" };
  const schedule = settingsDocument(ctx, "backup_schedule", DEFAULT_SCHEDULE);

  routes.get(
    base,
    "Lists the project's backups: logical backups written by Strata and, for an installation " +
      "administrator and a project on the embedded cluster (which archives its WAL: archiver_enabled), the " +
      "cluster's base backups (is_physical_backup); pitr_enabled once a base backup exists (restore-pitr " +
      "then replays WAL to the second)",
    { access: read, status: 200, response: Backups },
    async ({ req, project }) => {
      const backups = service();
      // The cluster's base backups hold every project: the installation's, shown to its administrators only.
      const archives = backups.archives(project.record.clusterId) && req.principal!.installationAdmin;
      const physical = archives ? await backups.physical!.list() : [];
      const window = archives ? await backups.physical!.window() : {};
      const pitr = physical.some((b) => b.status === "COMPLETED");
      return {
        region: "local",
        walg_enabled: archives,
        archiver_enabled: archives,
        pitr_enabled: pitr,
        backups: [...(await backups.list(project.ref)).map(item), ...physical.map(physicalItem)].sort(
          (a, b) => a.id - b.id,
        ),
        physical_backup_data: pitr
          ? {
              earliest_physical_backup_date_unix: unix(window.earliest),
              latest_physical_backup_date_unix: unix(window.latest),
            }
          : {},
      };
    },
  );

  routes.post(
    base,
    "Takes a backup of the project's database now (Strata's own endpoint); answers it RUNNING, and the " +
      "list shows its progress, size and status. With is_physical_backup: a base backup of the whole " +
      "embedded cluster (every project on it), the start of WAL replay for restore-pitr; installation " +
      "administrators only (403 for others)",
    {
      project: "database",
      access: write,
      body: z.object({ is_physical_backup: z.boolean().optional() }).strict(),
      status: 201,
      response: BackupItem,
    },
    async ({ req, project, body }) => {
      if (body.is_physical_backup) {
        requireInstallationAdmin(req.principal!, "A physical backup (a copy of every project's files)");
        if (!service().archives(project.record.clusterId))
          throw new HttpError(
            400,
            "Physical backups need the embedded cluster Strata runs (this project's cluster is not Strata's: DATABASE_URL)",
          );
        const started = await service().beginPhysical("manual");
        return physicalItem(started!.row);
      }
      const started = await service().begin(project.ref, "manual");
      return item(started!.row);
    },
  );

  configDocumentRoutes(routes, {
    path: `${base}/schedule`,
    store: schedule,
    read: {
      summary: "Gets the time of day (UTC) of the project's daily backup",
      feature: { name: "backup_schedule" },
      access: read,
      response: Schedule,
      answer: async (current, { project }) => {
        // The default schedule has been in force since the project was created.
        return {
          schedule_for: current.schedule_for,
          updated_at:
            current.updated_at || (await projectCreatedAt(ctx.platformPool, project.ref)).toISOString(),
        };
      },
    },
    update: {
      method: "patch",
      feature: { name: "backup_schedule" },
      summary:
        "Sets the time of day (UTC) of the daily backup; a time already passed today first runs tomorrow; " +
        "3 changes per 24 hours",
      access: write,
      body: z
        .object({
          schedule_for: z
            .string()
            .regex(/^([01]\d|2[0-3]):[0-5]\d:[0-5]\d$/, "must be a time of day HH:MM:SS (UTC)"),
        })
        .strict(),
      response: Schedule,
      status: 200,
      changes: async (body, { project }) => {
        const now = new Date();
        const recent = ((await schedule.read(project.ref)).changes ?? []).filter(
          (t) => now.getTime() - new Date(t).getTime() < 86_400_000,
        );
        if (recent.length >= SCHEDULE_CHANGES_PER_DAY) {
          throw new HttpError(
            429,
            `The backup schedule can be changed ${SCHEDULE_CHANGES_PER_DAY} times per 24 hours; next change possible after ${new Date(new Date(recent[0]).getTime() + 86_400_000).toISOString()}`,
          );
        }
        return {
          schedule_for: body.schedule_for,
          updated_at: now.toISOString(),
          changes: [...recent, now.toISOString()],
        };
      },
      answer: (updated) => ({ schedule_for: updated.schedule_for, updated_at: updated.updated_at }),
    },
  });

  routes.post(
    `${base}/restore-pitr`,
    "Restores the project's database as it was at the target time, in one transaction (the database is " +
      "never half-restored): on the embedded cluster, for an installation administrator, by WAL replay from " +
      "the latest base backup before it (to the second), else (or when the archived WAL has a gap) from the " +
      "latest logical backup taken at or before it; progress in GET .../backups/restores",
    {
      project: "database",
      access: write,
      body: z.object({ recovery_time_target_unix: z.number().int().nonnegative() }).strict(),
      status: 201,
      response: z.object({}),
    },
    async ({ req, project, body }) => {
      const target = new Date(body.recovery_time_target_unix * 1000);
      if (target.getTime() > Date.now())
        throw new HttpError(400, "recovery_time_target_unix is in the future");
      await requireFeature(ctx.platformPool, project.ref, "pitr");
      // The pitr add-on's variant is the restore window (Enterprise, which includes PITR: the backups kept).
      const days = await pitrDays(ctx, project.ref);
      if (days !== undefined && target.getTime() < Date.now() - days * 86_400_000)
        throw new HttpError(400, `The pitr add-on restores the last ${days} days only`);
      // WAL replay restores from the cluster's base backups: the installation's administrators only.
      await service().beginRestore(project.ref, target, req.principal!.installationAdmin);
      return {};
    },
  );

  routes.get(
    `${base}/restores`,
    "Lists the project's restores with their progress and outcome (Strata's own endpoint)",
    { access: read, status: 200, response: z.array(Restore) },
    async ({ project }) => service().restores(project.ref),
  );

  return routes.router;
}
