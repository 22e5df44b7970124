import { chownSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { oneOffClient, withOneOffClient } from "../../db/client";
import { clusterOwner } from "../../db/clusterDirectory";
import {
  ClusterProcess,
  copyBaseBackup,
  freePort,
  missingSegments,
  removeArchivedBefore,
  restoreCommand,
  takeBaseBackup,
  type OwnCluster,
} from "../../db/physical";
import { stopOrphanedPostmaster } from "../../db/postmasterProcesses";
import type { Logger } from "../../log";

export interface PhysicalBackupRow {
  id: string;
  cluster_id: string;
  kind: string;
  status: string;
  location: string;
  size_bytes: string | null;
  start_lsn: string | null;
  stop_lsn: string | null;
  start_wal_file: string | null;
  error: string | null;
  inserted_at: Date;
  consistent_at: Date | null;
}

/** How long the archiver may take to archive the segment a restore needs. */
const ARCHIVE_WAIT_MS = 60_000;
/** How long WAL replay up to a restore's target may take. */
const RECOVERY_WAIT_MS = 10 * 60_000;

/** A cluster recovered to a point in time, running until `stop` (which deletes it). */
export interface RecoveredCluster {
  port: number;
  stop(): Promise<void>;
}

/**
 * Base backups of the cluster Strata runs, with its archived WAL (STRATA_DATA_DIR/wal-archive): on demand,
 * daily, kept `retentionDays` (the newest completed one always, and the WAL it needs), and the clusters
 * recovered from them to a point in time for restore-pitr. Base backups are directories under
 * STRATA_DATA_DIR/base-backups (never in S3: the WAL archive beside them is local too).
 */
export class PhysicalBackups {
  constructor(
    private readonly platformPool: pg.Pool,
    readonly cluster: OwnCluster,
    private readonly retentionDays: number,
    private readonly log: Logger,
  ) {}

  serves(clusterId: string): boolean {
    return clusterId === this.cluster.clusterId;
  }

  async list(): Promise<PhysicalBackupRow[]> {
    const { rows } = await this.platformPool.query<PhysicalBackupRow>(
      "select * from platform.physical_backups where cluster_id = $1 order by id",
      [this.cluster.clusterId],
    );
    return rows;
  }

  /** What restore-pitr can reach: from the oldest completed base backup to the last archived WAL. */
  async window(): Promise<{ earliest?: Date; latest?: Date }> {
    const { rows } = await this.platformPool.query(
      "select min(consistent_at) as earliest from platform.physical_backups where cluster_id = $1 and status = 'COMPLETED'",
      [this.cluster.clusterId],
    );
    if (!rows[0].earliest) return {};
    const latest = await this.onCluster((c) =>
      c.query("select last_archived_time from pg_stat_archiver"),
    ).then((r) => r.rows[0]?.last_archived_time as Date | null);
    return { earliest: rows[0].earliest, latest: latest ?? undefined };
  }

  private async onCluster<T>(work: (c: pg.Client) => Promise<T>, name = "strata-physical"): Promise<T> {
    return withOneOffClient({ connectionString: this.cluster.adminUrl, application_name: name }, work);
  }

  /** Starts a base backup; answers its row (RUNNING), or undefined when the schedule slot is taken already. */
  async begin(
    kind: "manual" | "scheduled",
    scheduledFor?: Date,
  ): Promise<{ row: PhysicalBackupRow; done: Promise<PhysicalBackupRow> } | undefined> {
    const { rows } = await this.platformPool.query<PhysicalBackupRow>(
      `insert into platform.physical_backups (cluster_id, kind, location, scheduled_for)
       values ($1, $2, '', $3) on conflict (cluster_id, scheduled_for) do nothing returning *`,
      [this.cluster.clusterId, kind, scheduledFor ?? null],
    );
    if (!rows[0]) return undefined;
    const location = path.join("base-backups", String(rows[0].id));
    await this.platformPool.query("update platform.physical_backups set location = $2 where id = $1", [
      rows[0].id,
      location,
    ]);
    const row = { ...rows[0], location };
    return { row, done: this.run(row) };
  }

  private async run(row: PhysicalBackupRow): Promise<PhysicalBackupRow> {
    try {
      const taken = await this.onCluster(
        (c) =>
          takeBaseBackup(
            c,
            this.cluster.databaseDir,
            path.join(this.cluster.dataDir, row.location),
            `strata base backup ${row.id}`,
          ),
        `strata-basebackup-${row.id}`,
      );
      const { rows } = await this.platformPool.query<PhysicalBackupRow>(
        `update platform.physical_backups set status = 'COMPLETED', size_bytes = $2, start_lsn = $3, stop_lsn = $4,
                start_wal_file = $5, consistent_at = $6 where id = $1 returning *`,
        [row.id, taken.bytes, taken.startLsn, taken.stopLsn, taken.startWalFile, taken.consistentAt],
      );
      await this.applyRetention().catch((e: Error) =>
        this.log.warn({ err: e.message }, "base backup retention failed"),
      );
      return rows[0];
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, "base backup failed");
      const { rows } = await this.platformPool.query<PhysicalBackupRow>(
        "update platform.physical_backups set status = 'FAILED', error = $2 where id = $1 returning *",
        [row.id, (e as Error).message],
      );
      return rows[0];
    }
  }

  /**
   * A base backup left RUNNING by a stopped node failed (its session, and so the backup, ended with it); a
   * restore cluster it left is stopped and deleted.
   */
  async failInterrupted(): Promise<void> {
    const leftovers = path.join(this.cluster.dataDir, "restore-clusters");
    if (existsSync(leftovers))
      for (const name of readdirSync(leftovers)) {
        const data = path.join(leftovers, name, "pgdata");
        if (existsSync(data)) await stopOrphanedPostmaster(data).catch(() => {});
        await rm(path.join(leftovers, name), { recursive: true, force: true });
      }
    const { rows } = await this.platformPool.query<PhysicalBackupRow>(
      `update platform.physical_backups set status = 'FAILED', error = 'interrupted: the Strata node taking it stopped'
        where cluster_id = $1 and status = 'RUNNING' returning *`,
      [this.cluster.clusterId],
    );
    for (const row of rows)
      await rm(path.join(this.cluster.dataDir, row.location), { recursive: true, force: true });
  }

  /**
   * Removes base backups older than the retention period (the newest completed one is always kept), then the
   * archived WAL that no kept base backup needs.
   */
  async applyRetention(): Promise<void> {
    const { rows } = await this.platformPool.query<PhysicalBackupRow>(
      `delete from platform.physical_backups b
        where b.cluster_id = $1 and b.status <> 'RUNNING'
          and coalesce(b.consistent_at, b.inserted_at) < now() - make_interval(days => $2)
          and b.id <> coalesce((select max(id) from platform.physical_backups
                                 where cluster_id = $1 and status = 'COMPLETED'), 0)
        returning *`,
      [this.cluster.clusterId, this.retentionDays],
    );
    for (const row of rows)
      await rm(path.join(this.cluster.dataDir, row.location), { recursive: true, force: true });
    const { rows: oldest } = await this.platformPool.query(
      `select start_wal_file from platform.physical_backups where cluster_id = $1 and status = 'COMPLETED'
        order by id limit 1`,
      [this.cluster.clusterId],
    );
    if (oldest[0]?.start_wal_file)
      await removeArchivedBefore(this.cluster.archiveDir, oldest[0].start_wal_file);
  }

  /** The latest completed base backup from which `target` can be reached (consistent at or before it). */
  async baseBackupFor(target: Date): Promise<PhysicalBackupRow | undefined> {
    const { rows } = await this.platformPool.query<PhysicalBackupRow>(
      `select * from platform.physical_backups where cluster_id = $1 and status = 'COMPLETED' and consistent_at <= $2
        order by consistent_at desc limit 1`,
      [this.cluster.clusterId, target],
    );
    return rows[0];
  }

  /**
   * Makes the archive reach now: a committed transaction after any past target (recovery stops at the first
   * commit past it), then a WAL switch, waiting until the switched segment is archived. Answers the WAL
   * segments from the backup's start on that the archive lacks (none: the target can be reached).
   */
  async archiveUpToNow(backup: PhysicalBackupRow): Promise<string[]> {
    const last = await this.onCluster(async (c) => {
      await c.query("select pg_current_xact_id()");
      const { rows } = await c.query(
        "select pg_walfile_name(pg_switch_wal()) as last, pg_size_bytes(current_setting('wal_segment_size')) as size",
      );
      return rows[0] as { last: string; size: string };
    });
    const file = path.join(this.cluster.archiveDir, last.last);
    for (const until = Date.now() + ARCHIVE_WAIT_MS; !existsSync(file);) {
      if (Date.now() > until) return [last.last];
      await new Promise((r) => setTimeout(r, 200));
    }
    return missingSegments(this.cluster.archiveDir, backup.start_wal_file!, last.last, Number(last.size));
  }

  /**
   * Starts a cluster from `backup` under `workDir`, replaying archived WAL up to `target` and promoting it
   * there; answers once it accepts writes (recovery done). Its own WAL is not archived.
   */
  async recover(backup: PhysicalBackupRow, target: Date, workDir: string): Promise<RecoveredCluster> {
    const dataDir = path.join(workDir, "pgdata");
    await copyBaseBackup(path.join(this.cluster.dataDir, backup.location), dataDir);
    writeFileSync(path.join(dataDir, "recovery.signal"), "", { mode: 0o600 });
    const owner = clusterOwner();
    if (owner) chownSync(path.join(dataDir, "recovery.signal"), owner.uid, owner.gid);
    const port = await freePort();
    const proc = new ClusterProcess({
      dataDir,
      strataDataDir: this.cluster.dataDir,
      port,
      listenAddresses: "127.0.0.1",
      settings: {
        archive_mode: "off",
        restore_command: restoreCommand(this.cluster.archiveDir),
        // Postgres reads this setting in its own format, not ISO 8601's.
        recovery_target_time: target.toISOString().replace("T", " ").replace(/Z$/, "+00"),
        recovery_target_action: "promote",
      },
      onLog: (line) => this.log.debug({ postgres: line.trim() }, "restore cluster"),
    });
    const stop = async () => {
      await proc.stop();
      await rm(workDir, { recursive: true, force: true });
    };
    try {
      await proc.start();
      const url = new URL(this.cluster.adminUrl);
      url.port = String(port);
      for (const until = Date.now() + RECOVERY_WAIT_MS; ;) {
        if (!proc.running) throw new Error(`WAL replay stopped: ${proc.lastLines()}`);
        const client = oneOffClient({ connectionString: url.toString() });
        const recovering = await client
          .connect()
          .then(() => client.query("select pg_is_in_recovery() as r"))
          .then((r) => r.rows[0].r as boolean)
          .catch(() => true)
          .finally(() => client.end().catch(() => {}));
        if (!recovering) break;
        if (Date.now() > until) throw new Error("WAL replay did not reach the target in time");
        await new Promise((r) => setTimeout(r, 250));
      }
      return { port, stop };
    } catch (e) {
      await stop();
      throw e;
    }
  }
}
