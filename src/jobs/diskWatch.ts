import { statfs } from "node:fs/promises";
import type pg from "pg";
import type { AppContext } from "../context";
import { withOneOffClient } from "../db/client";
import type { ProjectRuntime } from "../projects/runtime";

declare module "../context" {
  interface AppContext {
    /** The embedded cluster's disk watermarks: refuses every project's writes when its volume is nearly full. */
    clusterDisk?: ClusterDiskGuard;
  }
}

/** Free space of the volume holding `dir`, measured now. */
async function freeBytes(dir: string): Promise<number> {
  const fs = await statfs(dir);
  return fs.bavail * fs.bsize;
}

const MB = 1024 * 1024;

/**
 * Disk watermarks of the volume holding the embedded cluster's data directory. PostgreSQL stops (PANIC) when
 * it cannot write WAL, so below `refuseBytes` free every project's writes are refused cleanly first, until
 * more than `warnBytes` are free again; below `warnBytes` a warning is logged. The refusal is the cluster's
 * default (ALTER SYSTEM default_transaction_read_only, with a reload): it reaches every project's sessions,
 * open or not, at their next transaction, and leaves each project's own read-only mode (a setting of its
 * roles in its database, which outranks the cluster's) as it was. Strata's superuser is exempt by its own
 * role setting (db/embedded.ts). Writes then fail with PostgreSQL's read-only error (SQLSTATE 25006), which
 * each API answers as a refused statement, not as a database out of reach.
 */
export class ClusterDiskGuard {
  /** Whether the refusal is applied on the cluster (read from it at the first check). */
  private refusing: boolean | undefined;
  private warned = false;
  private free: number | undefined;
  private checking: Promise<void> | undefined;

  constructor(
    private readonly ctx: AppContext,
    private readonly cluster: { id: string; adminUrl: string; databaseDir: string },
    private readonly watermarks: { warnBytes: number; refuseBytes: number },
  ) {}

  /** Why the cluster's writes are refused now, or undefined. */
  refusal(): string | undefined {
    if (!this.refusing || this.free === undefined) return undefined;
    return (
      `only ${Math.floor(this.free / MB)} MB free on the database's volume: writes are refused until ` +
      `more than ${Math.floor(this.watermarks.warnBytes / MB)} MB are free`
    );
  }

  /** Whether writes of the projects on `clusterId` are refused now. */
  refuses(clusterId: string): boolean {
    return clusterId === this.cluster.id && this.refusing === true;
  }

  /** Measures the volume, refuses or allows writes as the watermarks say, and logs each change once. */
  check(): Promise<void> {
    this.checking ??= this.measure().finally(() => (this.checking = undefined));
    return this.checking;
  }

  private async measure(): Promise<void> {
    const { warnBytes, refuseBytes } = this.watermarks;
    const free = await freeBytes(this.cluster.databaseDir);
    this.free = free;
    // A refusal an earlier run left applied is kept or lifted as the space says.
    const refusing = (this.refusing ??= await this.refusalApplied());
    const refuse = free < refuseBytes || (refusing && free < warnBytes);
    const figures = { free_mb: Math.floor(free / MB), warn_mb: warnBytes / MB, refuse_mb: refuseBytes / MB };
    if (refuse !== refusing) {
      await this.applyRefusal(refuse);
      this.refusing = refuse;
      if (refuse)
        this.ctx.log.error(
          figures,
          "the database's volume is nearly full: every project's writes are refused",
        );
      else this.ctx.log.info(figures, "space is back on the database's volume: writes are allowed");
    }
    const low = free < warnBytes;
    if (low && !refuse && !this.warned)
      this.ctx.log.warn(figures, "the database's volume is running out of space");
    this.warned = low;
  }

  private withCluster<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    return withOneOffClient({ connectionString: this.cluster.adminUrl }, work);
  }

  private refusalApplied(): Promise<boolean> {
    return this.withCluster(async (client) => {
      const { rows } = await client.query(
        `select exists (select from pg_file_settings where name = 'default_transaction_read_only'
                          and setting = 'on' and sourcefile like '%postgresql.auto.conf') as on`,
      );
      return rows[0].on;
    });
  }

  private applyRefusal(on: boolean): Promise<void> {
    return this.withCluster(async (client) => {
      await client.query(
        on
          ? "alter system set default_transaction_read_only = on"
          : "alter system reset default_transaction_read_only",
      );
      await client.query("select pg_reload_conf()");
    });
  }
}

/**
 * Watches the disks on an interval: the embedded cluster's volume first (ClusterDiskGuard; also at once, so
 * that a refusal left by an earlier run is lifted when space is back), then the disk of every active project
 * open on this node (an unused project is not kept open for it; it is checked again when a request opens
 * it), which `settle` measures and answers with the project's read-only mode (management's
 * database-config/readonly.ts, which also ends temporary disables whose window passed).
 */
export class DiskWatch {
  private readonly timer: NodeJS.Timeout;
  private busy = false;

  constructor(
    private readonly ctx: AppContext,
    intervalMs: number,
    private readonly settle: (project: ProjectRuntime) => Promise<unknown>,
  ) {
    this.timer = setInterval(() => void this.tick(), intervalMs);
    this.timer.unref();
    void this.checkClusterDisk();
  }

  private async checkClusterDisk(): Promise<void> {
    await this.ctx.clusterDisk
      ?.check()
      .catch((e: Error) => this.ctx.log.warn({ err: e.message }, "the database's volume check failed"));
  }

  private async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      await this.checkClusterDisk();
      for (const project of await this.ctx.registry.open()) {
        if (project.record.status !== "ACTIVE_HEALTHY") continue;
        await this.settle(project).catch((e) =>
          this.ctx.log.warn({ ref: project.ref, err: (e as Error).message }, "read-only check failed"),
        );
      }
    } catch (e) {
      this.ctx.log.warn({ err: (e as Error).message }, "read-only check failed");
    } finally {
      this.busy = false;
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
