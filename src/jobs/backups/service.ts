import { randomUUID } from "node:crypto";
import path from "node:path";
import { createGunzip, createGzip } from "node:zlib";
import { pipeline, Transform } from "node:stream";
import type { AppContext } from "../../context";
import { CATALOG_ONLY_SESSION, oneOffClient } from "../../db/client";
import { DiskBackend } from "../../storage/backend/disk";
import { backendOf, type ObjectBackend } from "../../storage/backend";
import { JobRefused } from "../refused";
import { readSettings } from "../../projects/settings";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { finished } from "node:stream/promises";
import { withPort } from "../../db/urls";
import { writeDump } from "./dump";
import type { PhysicalBackupRow, PhysicalBackups } from "./physical";
import { applyDump } from "./restore";
import { withOwnerLoad } from "../../projects/ownerLoad";

/**
 * How a restore brings the project back: WAL replay from a base backup to the target second (clusters Strata
 * runs), or the latest logical backup at or before the target (`fallback` when the WAL turns out incomplete).
 */
type RestorePlan =
  | { method: "logical_backup"; backup: BackupRow }
  | { method: "wal_replay"; base: PhysicalBackupRow; target: Date; fallback: BackupRow | undefined };

export interface BackupRow {
  id: string;
  project_ref: string;
  kind: string;
  status: string;
  progress: number;
  location: string;
  size_bytes: string | null;
  error: string | null;
  taken_at: Date | null;
  inserted_at: Date;
  completed_at: Date | null;
}

/** The daily backup time of a project: the schedule's default until PATCH .../backups/schedule sets one. */
export const DEFAULT_SCHEDULE = { schedule_for: "00:00:00", updated_at: "", changes: [] as string[] };

declare module "../../context" {
  interface AppContext {
    /** Backups of project databases: on demand, scheduled, restored (absent in CLI commands that serve nothing). */
    backups?: BackupService;
  }
}

/**
 * Backups of project databases: taken on demand, on each project's daily schedule and before a restore;
 * kept in the backup store (the S3 bucket storage uses, or the data directory's `backups/`) for
 * `retentionDays`; restored in one transaction on the project's database. Started and stopped by app.ts;
 * the Management API's backup routes call it through the context.
 */
export class BackupService {
  readonly store: ObjectBackend;
  private readonly timer: NodeJS.Timeout;
  private readonly running = new Set<Promise<unknown>>();
  private stopped = false;

  constructor(
    private readonly ctx: AppContext,
    private readonly retentionDays: number,
    tickMs: number,
    /** Base backups and archived WAL of the cluster Strata runs (absent with DATABASE_URL). */
    readonly physical?: PhysicalBackups,
  ) {
    this.store = ctx.config.storage.s3Bucket
      ? backendOf(ctx.config)
      : new DiskBackend(path.join(ctx.config.dataDir, "backups"));
    this.timer = setInterval(() => this.track(this.tick()), tickMs);
    this.timer.unref();
  }

  /**
   * Marks what a stopped node left RUNNING as failed. A running job holds a session named after it on the
   * project's cluster (`strata-backup-<id>`, `strata-restore-<id>`); a row without one (after a grace period
   * for the job to connect) was left by a node that stopped.
   */
  async start(): Promise<void> {
    await this.physical?.failInterrupted();
    for (const table of ["database_backups", "database_restores"] as const) {
      const { rows } = await this.ctx.platformPool.query(
        `select id, project_ref from platform.${table} where status = 'RUNNING'`,
      );
      for (const row of rows) await this.failIfOrphaned(table, row.id, row.project_ref);
    }
  }

  private async failIfOrphaned(
    table: "database_backups" | "database_restores",
    id: string,
    ref: string,
  ): Promise<boolean> {
    const project = await this.ctx.registry.get(ref).catch(() => undefined);
    const name = `${table === "database_backups" ? "strata-backup" : "strata-restore"}-${id}`;
    // A project whose database cannot be reached (paused) runs nothing.
    const alive = project
      ? await project.adminPool
          .query("select exists (select from pg_stat_activity where application_name = $1) as alive", [name])
          .then((r) => r.rows[0].alive as boolean)
          .catch(() => false)
      : false;
    if (alive) return false;
    const started = table === "database_backups" ? "inserted_at" : "started_at";
    const { rowCount } = await this.ctx.platformPool.query(
      `update platform.${table} set status = 'FAILED', error = $2, ${table === "database_backups" ? "completed_at" : "finished_at"} = now()
        where id = $1 and status = 'RUNNING' and ${started} < now() - interval '30 seconds'`,
      [
        id,
        table === "database_backups"
          ? "interrupted: the Strata node taking it stopped"
          : "interrupted: the Strata node running it stopped (nothing was changed)",
      ],
    );
    return rowCount === 1;
  }

  /** Whether the project's cluster archives WAL (restore-pitr replays it to the second). */
  archives(clusterId: string): boolean {
    return this.physical?.serves(clusterId) ?? false;
  }

  /** Starts a base backup of the cluster Strata runs (all its projects); answers its row RUNNING. */
  beginPhysical(kind: "manual" | "scheduled", scheduledFor?: Date) {
    return this.physical!.begin(kind, scheduledFor).then((started) => {
      if (started) this.track(started.done);
      return started;
    });
  }

  private track<T>(work: Promise<T>): Promise<T> {
    this.running.add(work);
    work.catch(() => {}).finally(() => this.running.delete(work));
    return work;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await Promise.allSettled([...this.running]);
  }

  async list(ref: string): Promise<BackupRow[]> {
    const { rows } = await this.ctx.platformPool.query(
      "select * from platform.database_backups where project_ref = $1 order by id",
      [ref],
    );
    return rows;
  }

  /** Starts a backup of the project; answers its row at once (RUNNING), the dump goes on in the background. */
  async begin(
    ref: string,
    kind: "manual" | "scheduled" | "pre_restore",
    scheduledFor?: Date,
  ): Promise<{ row: BackupRow; done: Promise<BackupRow> } | undefined> {
    const { rows } = await this.ctx.platformPool.query(
      `insert into platform.database_backups (project_ref, kind, location, scheduled_for) values ($1, $2, $3, $4)
       on conflict (project_ref, scheduled_for) do nothing returning *`,
      [ref, kind, `${ref}/${randomUUID()}`, scheduledFor ?? null],
    );
    if (!rows[0]) return undefined;
    const done = this.track(this.run(rows[0]));
    return { row: rows[0], done };
  }

  private async run(row: BackupRow): Promise<BackupRow> {
    const project = await this.ctx.registry.get(row.project_ref);
    const client = oneOffClient({
      connectionString: project!.record.adminUrl,
      options: CATALOG_ONLY_SESSION,
      application_name: `strata-backup-${row.id}`,
    });
    const gzip = createGzip();
    let lastReport = 0;
    try {
      await client.connect();
      const stored = this.store.write(row.location, gzip);
      stored.catch(() => {});
      let takenAt: Date | undefined;
      await writeDump(
        client,
        gzip,
        (done, total) => {
          const percent = Math.floor((done / total) * 99);
          if (Date.now() - lastReport < 500) return;
          lastReport = Date.now();
          void this.ctx.platformPool
            .query("update platform.database_backups set progress = $2 where id = $1", [row.id, percent])
            .catch(() => {});
        },
        (at) => (takenAt = at),
      );
      gzip.end();
      const bytes = await stored;
      const { rows } = await this.ctx.platformPool.query(
        `update platform.database_backups set status = 'COMPLETED', progress = 100, size_bytes = $2, taken_at = $3,
                completed_at = now() where id = $1 returning *`,
        [row.id, bytes.size, takenAt],
      );
      await this.applyRetention(row.project_ref);
      return rows[0];
    } catch (e) {
      gzip.destroy(e as Error);
      this.ctx.log.warn({ ref: row.project_ref, err: (e as Error).message }, "backup failed");
      const { rows } = await this.ctx.platformPool.query(
        `update platform.database_backups set status = 'FAILED', error = $2, completed_at = now() where id = $1
         returning *`,
        [row.id, (e as Error).message],
      );
      await this.store.remove([row.location]).catch(() => {});
      return rows[0];
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** Removes backups older than the retention period; the newest completed backup is always kept. */
  async applyRetention(ref: string): Promise<void> {
    const { rows } = await this.ctx.platformPool.query(
      `delete from platform.database_backups b
        where b.project_ref = $1 and b.status <> 'RUNNING'
          and coalesce(b.taken_at, b.inserted_at) < now() - make_interval(days => $2)
          and b.id <> coalesce((select max(id) from platform.database_backups
                                 where project_ref = $1 and status = 'COMPLETED'), 0)
        returning location`,
      [ref, this.retentionDays],
    );
    if (rows.length) await this.store.remove(rows.map((r) => r.location));
  }

  /**
   * Restores the project as it was at `target`, from the latest completed backup taken at or before it
   * (logical backups: no WAL replay, so the project comes back as of that backup), or, with `walReplay` (an
   * installation administrator's), by WAL replay from the cluster's latest base backup before it. Answers
   * the restore's row at once; the work goes on in the background and is recorded in it.
   */
  async beginRestore(
    ref: string,
    target: Date,
    walReplay: boolean,
  ): Promise<{ id: string; done: Promise<void> }> {
    const { rows: backups } = await this.ctx.platformPool.query(
      `select * from platform.database_backups where project_ref = $1 and status = 'COMPLETED' and taken_at <= $2
        order by taken_at desc limit 1`,
      [ref, target],
    );
    const project = await this.ctx.registry.get(ref);
    const archives = project !== undefined && this.archives(project.record.clusterId);
    const base = archives && walReplay ? await this.physical!.baseBackupFor(target) : undefined;
    if (!backups[0] && !base) {
      const lacking = walReplay
        ? "neither a base backup with archived WAL nor a logical backup"
        : "no logical backup; WAL replay from the cluster's base backups is for the installation's administrators";
      throw new JobRefused(
        400,
        `No completed backup of project ${ref} was taken at or before ${target.toISOString()}` +
          (archives ? ` (${lacking})` : ""),
      );
    }
    const plan: RestorePlan = base
      ? { method: "wal_replay", base, target, fallback: backups[0] }
      : { method: "logical_backup", backup: backups[0] };
    const { rows: running } = await this.ctx.platformPool.query(
      "select id from platform.database_restores where project_ref = $1 and status = 'RUNNING'",
      [ref],
    );
    if (running[0] && !(await this.failIfOrphaned("database_restores", running[0].id, ref))) {
      throw new JobRefused(409, `A restore of project ${ref} is already running`);
    }
    // One running restore per project (a unique index): of two requests at once, one answers 409.
    const { rows } = await this.ctx.platformPool
      .query(
        `insert into platform.database_restores (project_ref, backup_id, recovery_time_target, method, physical_backup_id)
         values ($1, $2, $3, $4, $5) returning id`,
        [
          ref,
          plan.method === "logical_backup" ? plan.backup.id : null,
          target,
          plan.method,
          plan.method === "wal_replay" ? plan.base.id : null,
        ],
      )
      .catch((e) => {
        if ((e as { code?: string }).code === "23505") {
          throw new JobRefused(409, `A restore of project ${ref} is already running`);
        }
        throw e;
      });
    const id: string = rows[0].id;
    const done = this.track(this.restore(id, ref, plan));
    return { id, done };
  }

  private async restore(id: string, ref: string, plan: RestorePlan): Promise<void> {
    const project = await this.ctx.registry.get(ref);
    const client = oneOffClient({
      connectionString: project!.record.adminUrl,
      options: CATALOG_ONLY_SESSION,
      application_name: `strata-restore-${id}`,
    });
    let backup: BackupRow | undefined;
    let dumpFile: string | undefined;
    let recovered: Awaited<ReturnType<PhysicalBackups["recover"]>> | undefined;
    const workDirs = path.join(this.ctx.config.dataDir, "restore-clusters");
    const setProgress = (percent: number) =>
      this.ctx.platformPool
        .query("update platform.database_restores set progress = $2 where id = $1", [id, percent])
        .catch(() => {});
    /** The session, the recovered cluster, its directory and the dump go whatever happened (idempotent). */
    const cleanUp = async () => {
      await client.end().catch(() => {});
      await recovered?.stop().catch(() => {});
      if (dumpFile) await rm(dumpFile, { force: true }).catch(() => {});
    };
    try {
      // Connected first: the session's name tells other nodes this restore is alive.
      await client.connect();
      // The state being replaced is kept first, so a restore can itself be undone (restore-pitr to now).
      const safety = await this.begin(ref, "pre_restore");
      const saved = await safety!.done;
      if (saved.status !== "COMPLETED")
        throw new Error(`the backup of the current state failed: ${saved.error}`);
      await setProgress(5);
      backup = plan.method === "logical_backup" ? plan.backup : undefined;
      if (plan.method === "wal_replay") {
        const missing = await this.physical!.archiveUpToNow(plan.base);
        if (missing.length) {
          // The archive has a gap (archiving failed, or retention took it): the logical backup it is.
          if (!plan.fallback)
            throw new Error(
              `the archived WAL from base backup ${plan.base.id} on is incomplete (missing ${missing[0]}) and no logical backup was taken before the target`,
            );
          this.ctx.log.warn(
            { ref, missing: missing[0] },
            "archived WAL incomplete: restoring a logical backup",
          );
          backup = plan.fallback;
          await this.ctx.platformPool.query(
            `update platform.database_restores set method = 'logical_backup', backup_id = $2, physical_backup_id = null
              where id = $1`,
            [id, backup.id],
          );
        } else {
          // A cluster recovered to the target, the project's database dumped from it, then applied below.
          recovered = await this.physical!.recover(plan.base, plan.target, path.join(workDirs, id));
          await setProgress(40);
          dumpFile = path.join(workDirs, `${id}.sql.gz`);
          await this.dumpTo(withPort(project!.record.adminUrl, recovered.port), dumpFile, (done, total) =>
            setProgress(40 + Math.floor((done / total) * 20)),
          );
          // Only the dump is needed now.
          await recovered.stop();
          await setProgress(60);
        }
      }
      // Sessions of the project's own roles would hold locks on what is dropped; Strata's are superusers.
      await client.query(
        `select pg_terminate_backend(a.pid) from pg_stat_activity a join pg_roles r on r.rolname = a.usename
          where a.datname = current_database() and a.pid <> pg_backend_pid() and not r.rolsuper
            and a.backend_type = 'client backend'`,
      );
      const total = Number(backup?.size_bytes ?? 0) || 1;
      const [from, span] = backup ? [5, 90] : [60, 35];
      let read = 0;
      let lastReport = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _enc, callback) {
          read += chunk.length;
          callback(null, chunk);
        },
      });
      // pipeline: an error anywhere (a cut-off or damaged file) reaches the reader, never an unhandled event.
      const gunzip = createGunzip();
      // zlib may report a damaged file twice (write and flush); the reader has the first, the rest is noise.
      gunzip.on("error", () => {});
      const raw = backup ? await this.store.read(backup.location) : createReadStream(dumpFile!);
      const source = pipeline(raw, counter, gunzip, () => {});
      // Applied as the project's owner: the backup's objects and rows are the tenant's (see restore.ts).
      const skipped = await withOwnerLoad(
        project!.record,
        client,
        `strata-restore-${id}`,
        async (owner, strata) => {
          await owner.query("set local lock_timeout = '60s'");
          return applyDump(owner, strata, source, () => {
            if (Date.now() - lastReport < 500) return;
            lastReport = Date.now();
            void setProgress(from + Math.min(span, Math.floor((read / total) * span)));
          });
        },
      );
      if (skipped.length) {
        this.ctx.log.warn(
          { ref, statements: skipped.map((s) => s.slice(0, 200)) },
          "restore: statements only a superuser may run were left out",
        );
      }
      // Cleared before the restore is reported done, so a caller that sees COMPLETED finds nothing left over.
      await cleanUp();
      await this.ctx.platformPool.query(
        "update platform.database_restores set status = 'COMPLETED', progress = 100, finished_at = now() where id = $1",
        [id],
      );
    } catch (e) {
      this.ctx.log.warn(
        { ref, err: (e as Error).message },
        "restore failed; the database was left as it was",
      );
      await cleanUp();
      await this.ctx.platformPool.query(
        `update platform.database_restores set status = 'FAILED', error = $2, finished_at = now() where id = $1`,
        [id, `${(e as Error).message} (nothing was changed)`],
      );
    } finally {
      await cleanUp();
      // Schema caches, pools and realtime's slot start anew on every node: the row's change is announced.
      const announce = "update platform.projects set updated_at = now() where ref = $1";
      await this.ctx.platformPool.query(announce, [ref]);
      await this.ctx.registry.retire(ref).catch(() => {});
    }
  }

  /** Writes a dump of the database at `url` (a recovered cluster's copy of the project) to a gzip file. */
  private async dumpTo(url: string, file: string, progress: (done: number, total: number) => void) {
    await mkdir(path.dirname(file), { recursive: true });
    const client = oneOffClient({ connectionString: url, options: CATALOG_ONLY_SESSION });
    await client.connect();
    const gzip = createGzip();
    const out = createWriteStream(file, { mode: 0o600 });
    gzip.pipe(out);
    try {
      let last = 0;
      await writeDump(client, gzip, (done, total) => {
        if (Date.now() - last < 500) return;
        last = Date.now();
        progress(done, total);
      });
      gzip.end();
      await finished(out);
    } catch (e) {
      gzip.destroy();
      out.destroy();
      throw e;
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** Where a project's backups are kept (read before the project's rows go, to remove them after). */
  async locations(ref: string): Promise<string[]> {
    const { rows } = await this.ctx.platformPool.query(
      "select location from platform.database_backups where project_ref = $1",
      [ref],
    );
    return rows.map((r) => r.location);
  }

  async restores(ref: string): Promise<unknown[]> {
    const { rows } = await this.ctx.platformPool.query(
      `select id::int, backup_id::int, status, progress, error, recovery_time_target, started_at, finished_at,
              method, physical_backup_id::int
         from platform.database_restores where project_ref = $1 order by id`,
      [ref],
    );
    return rows;
  }

  /**
   * Takes each project's scheduled backup: the latest daily slot (the schedule's time, UTC) that has passed
   * and was set before it came. A slot is claimed by inserting its row, so one node takes it.
   */
  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      const { rows: projects } = await this.ctx.platformPool.query(
        `select p.ref, p.created_at, s.value as schedule from platform.projects p
           left join platform.project_settings s on s.project_ref = p.ref and s.kind = 'backup_schedule'
          where p.status = 'ACTIVE_HEALTHY'`,
      );
      const now = new Date();
      for (const p of projects) {
        const schedule = { ...DEFAULT_SCHEDULE, ...(p.schedule ?? {}) };
        const since = schedule.updated_at ? new Date(schedule.updated_at) : new Date(p.created_at);
        const [h, m, s] = schedule.schedule_for.split(":").map(Number);
        const slot = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), h, m, s));
        if (slot > now) slot.setUTCDate(slot.getUTCDate() - 1);
        if (slot <= since) continue;
        await this.begin(p.ref, "scheduled", slot);
      }
      if (this.physical) await this.physicalTick(now);
    } catch (e) {
      this.ctx.log.warn({ err: (e as Error).message }, "backup schedule check failed");
    }
  }

  /**
   * The daily base backup of the cluster Strata runs, at the default project's backup time: the latest slot
   * that has passed, claimed by its row (so a new installation gets its first one at the first check).
   */
  private async physicalTick(now: Date): Promise<void> {
    const schedule = { ...DEFAULT_SCHEDULE, ...(await this.schedule(this.ctx.registry.defaultRef)) };
    const [h, m, s] = schedule.schedule_for.split(":").map(Number);
    const slot = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate(), h, m, s));
    if (slot > now) slot.setUTCDate(slot.getUTCDate() - 1);
    await this.beginPhysical("scheduled", slot);
  }

  /** The schedule document of a project. */
  schedule(ref: string) {
    return readSettings(this.ctx, ref, "backup_schedule", DEFAULT_SCHEDULE);
  }
}
