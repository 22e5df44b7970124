import { randomBytes } from "node:crypto";
import { appendFileSync, chownSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { withOneOffClient } from "../db/client";
import { clusterOwner } from "../db/clusterDirectory";
import { ClusterProcess, freePort, restoreCommand, takeBaseBackup, type OwnCluster } from "../db/physical";
import { runUtilityStatement } from "../db/utility";
import type { Logger } from "../log";
import { replaceFile } from "./access";

/**
 * Read replicas of the cluster Strata runs: each is a streaming physical standby (a second PostgreSQL on
 * its own port and data directory under STRATA_DATA_DIR/replicas), made from a base backup, fed through a
 * physical replication slot of its own, and logging in with a replication role of its own (a member of
 * `strata_replication`, which the managed pg_hba.conf block lets in from loopback). A standby holds the
 * whole cluster, so every project on it is replicated; it is registered for the project that set it up,
 * whose REST reads it serves while ACTIVE_HEALTHY.
 */

export interface ReplicaRow {
  id: string;
  identifier: string;
  project_ref: string;
  cluster_id: string;
  region: string;
  status: string;
  port: number;
  location: string;
  slot_name: string;
  role_name: string;
  error: string | null;
  inserted_at: Date;
  updated_at: Date;
}

export interface ReplicaState extends ReplicaRow {
  /** Bytes of WAL the standby has yet to replay, as the primary sees it (null: not streaming). */
  lag_bytes: number | null;
  /** replay_lag of pg_stat_replication in seconds (null when idle or not streaming). */
  lag_seconds: number | null;
}

/** The group role whose members the managed pg_hba.conf block lets open replication connections from loopback. */
export const REPLICATION_GROUP = "strata_replication";

/** How long a new standby may take to start streaming. */
const STREAMING_WAIT_MS = 60_000;

export class ReplicaManager {
  private readonly processes = new Map<string, ClusterProcess>();
  private readonly building = new Set<Promise<unknown>>();
  /** Replicas being stopped on purpose (any other exit marks them UNHEALTHY). */
  private readonly stopping = new Set<string>();

  constructor(
    private readonly platformPool: pg.Pool,
    private readonly cluster: OwnCluster,
    private readonly log: Logger,
  ) {}

  /** True when the project's database is on the cluster this manager replicates. */
  serves(clusterId: string): boolean {
    return clusterId === this.cluster.clusterId;
  }

  private async onPrimary<T>(work: (client: pg.Client) => Promise<T>, name = "strata-replicas"): Promise<T> {
    return withOneOffClient({ connectionString: this.cluster.adminUrl, application_name: name }, work);
  }

  /** Every node reloads the project (its REST reads follow the replica's status). */
  private async touch(ref: string): Promise<void> {
    await this.platformPool.query("update platform.projects set updated_at = now() where ref = $1", [ref]);
  }

  private async setStatus(row: ReplicaRow, status: string, error: string | null = null): Promise<void> {
    await this.platformPool.query(
      "update platform.read_replicas set status = $2, error = $3, updated_at = now() where id = $1",
      [row.id, status, error],
    );
    await this.touch(row.project_ref);
  }

  private process(row: ReplicaRow): ClusterProcess {
    let proc = this.processes.get(row.identifier);
    if (!proc) {
      proc = new ClusterProcess({
        dataDir: path.join(this.cluster.dataDir, row.location, "pgdata"),
        strataDataDir: this.cluster.dataDir,
        port: row.port,
        listenAddresses: this.cluster.listenAddresses,
        // A standby archives nothing (the primary does); a promoted one must not write into its archive.
        settings: { archive_mode: "off" },
        onLog: (line) => this.log.debug({ replica: row.identifier, postgres: line.trim() }, "read replica"),
      });
      this.processes.set(row.identifier, proc);
    }
    return proc;
  }

  /** Starts a replica's server; should it exit by itself later, reads leave it (UNHEALTHY). */
  private async launch(row: ReplicaRow): Promise<void> {
    const proc = this.process(row);
    // The primary's current access rules and ALTER SYSTEM settings (they may have changed since the copy: a
    // standby must have at least the primary's max_locks_per_transaction and the like, or it stops replaying).
    for (const name of ["pg_hba.conf", "postgresql.auto.conf"])
      replaceFile(
        path.join(proc.options.dataDir, name),
        readFileSync(path.join(this.cluster.databaseDir, name), "utf8"),
      );
    await proc.start();
    void proc.whenExited().then(async () => {
      if (this.stopping.has(row.identifier) || this.processes.get(row.identifier) !== proc) return;
      this.processes.delete(row.identifier);
      this.log.warn({ replica: row.identifier, last: proc.lastLines() }, "read replica stopped");
      await this.setStatus(row, "UNHEALTHY", `the replica's server stopped: ${proc.lastLines()}`).catch(
        () => {},
      );
    });
  }

  /** The primary's pg_hba.conf was rewritten: each running replica takes the same rules and reloads. */
  async syncAccess(pgHba: string): Promise<void> {
    for (const [identifier, proc] of this.processes) {
      if (!proc.running) continue;
      replaceFile(path.join(proc.options.dataDir, "pg_hba.conf"), pgHba);
      const url = new URL(this.cluster.adminUrl);
      url.port = String(proc.options.port);
      await withOneOffClient({ connectionString: url.toString(), application_name: "strata-replicas" }, (c) =>
        c.query("select pg_reload_conf()"),
      ).catch((e: Error) => this.log.warn({ replica: identifier, err: e.message }, "replica reload failed"));
    }
  }

  /**
   * At server start: starts the registered standbys; one left half-made by a stopped node (COMING_UP,
   * GOING_DOWN) is taken apart.
   */
  async startAll(): Promise<void> {
    const { rows } = await this.platformPool.query<ReplicaRow>(
      "select * from platform.read_replicas where cluster_id = $1 order by id",
      [this.cluster.clusterId],
    );
    for (const row of rows) {
      if (row.status === "COMING_UP" || row.status === "GOING_DOWN") {
        await this.takeApart(row).catch(() => {});
        if (row.status === "GOING_DOWN") {
          await this.platformPool.query("delete from platform.read_replicas where id = $1", [row.id]);
          await this.touch(row.project_ref);
        } else await this.setStatus(row, "INIT_FAILED", "interrupted: the Strata node making it stopped");
        continue;
      }
      if (row.status === "INIT_FAILED") continue;
      try {
        await this.launch(row);
        if (row.status !== "ACTIVE_HEALTHY") await this.setStatus(row, "ACTIVE_HEALTHY");
      } catch (e) {
        this.log.warn({ replica: row.identifier, err: (e as Error).message }, "read replica did not start");
        await this.setStatus(row, "UNHEALTHY", (e as Error).message);
      }
    }
  }

  /** After the primary restarted with new start-time settings: each running replica restarts with them. */
  async restartAll(): Promise<void> {
    const { rows } = await this.platformPool.query<ReplicaRow>(
      "select * from platform.read_replicas where cluster_id = $1 and status in ('ACTIVE_HEALTHY', 'UNHEALTHY')",
      [this.cluster.clusterId],
    );
    for (const row of rows) {
      const proc = this.processes.get(row.identifier);
      this.stopping.add(row.identifier);
      this.processes.delete(row.identifier);
      await proc?.stop();
      this.stopping.delete(row.identifier);
      try {
        await this.launch(row);
        if (row.status !== "ACTIVE_HEALTHY") await this.setStatus(row, "ACTIVE_HEALTHY");
      } catch (e) {
        await this.setStatus(row, "UNHEALTHY", (e as Error).message);
      }
    }
  }

  async stopAll(): Promise<void> {
    await Promise.allSettled([...this.building]);
    for (const identifier of this.processes.keys()) this.stopping.add(identifier);
    await Promise.all([...this.processes.values()].map((p) => p.stop()));
    this.processes.clear();
  }

  async list(ref: string): Promise<ReplicaState[]> {
    const { rows } = await this.platformPool.query<ReplicaRow>(
      "select * from platform.read_replicas where project_ref = $1 order by id",
      [ref],
    );
    if (!rows.length) return [];
    const lag = await this.onPrimary((c) =>
      c.query(
        `select application_name, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint as lag_bytes,
                extract(epoch from replay_lag)::float8 as lag_seconds
           from pg_stat_replication where application_name = any($1)`,
        [rows.map((r) => r.identifier)],
      ),
    ).catch(() => ({ rows: [] as any[] }));
    return rows.map((r) => {
      const l = lag.rows.find((x) => x.application_name === r.identifier);
      return {
        ...r,
        lag_bytes: l?.lag_bytes == null ? null : Number(l.lag_bytes),
        lag_seconds: l?.lag_seconds ?? null,
      };
    });
  }

  /** Registers a replica (COMING_UP) and makes it in the background: base backup, standby start, streaming. */
  async setup(ref: string, region: string): Promise<ReplicaRow> {
    const suffix = randomBytes(4).toString("hex");
    const port = await freePort();
    const { rows } = await this.platformPool.query<ReplicaRow>(
      `insert into platform.read_replicas (identifier, project_ref, cluster_id, region, port, location, slot_name, role_name)
       values ($1, $2, $3, $4, $5, $6, $7, $8) returning *`,
      [
        `${ref}-rr-${region}-${suffix}`,
        ref,
        this.cluster.clusterId,
        region,
        port,
        path.join("replicas", `${ref}-${suffix}`),
        `strata_replica_${ref}_${suffix}`,
        `strata_replica_${ref}_${suffix}`,
      ],
    );
    const work = this.build(rows[0]);
    this.building.add(work);
    void work.finally(() => this.building.delete(work));
    return rows[0];
  }

  private async build(row: ReplicaRow): Promise<void> {
    const dir = path.join(this.cluster.dataDir, row.location);
    try {
      const password = randomBytes(24).toString("base64url");
      await this.onPrimary(async (c) => {
        // Several setups at once may both find the group missing: the loser's duplicate is fine.
        await c.query(
          `do $$ begin create role ${REPLICATION_GROUP} nologin; exception when duplicate_object then null; end $$`,
        );
        await runUtilityStatement(c, "create role %I with login replication password %L in role %I", [
          row.role_name,
          password,
          REPLICATION_GROUP,
        ]);
        // Made before the copy starts: the primary keeps every WAL segment the standby will ask for.
        await c.query("select pg_create_physical_replication_slot($1, true)", [row.slot_name]);
        await takeBaseBackup(
          c,
          this.cluster.databaseDir,
          path.join(dir, "pgdata"),
          `replica ${row.identifier}`,
        );
      }, `strata-replica-setup-${row.id}`);
      this.configureStandby(row, path.join(dir, "pgdata"), password);
      await this.launch(row);
      await this.waitStreaming(row);
      await this.setStatus(row, "ACTIVE_HEALTHY");
    } catch (e) {
      this.log.warn({ replica: row.identifier, err: (e as Error).message }, "read replica setup failed");
      await this.takeApart(row).catch(() => {});
      await this.setStatus(row, "INIT_FAILED", (e as Error).message).catch(() => {});
    }
  }

  /**
   * Makes the copy a standby: `standby.signal`, and the connection to the primary (with the role's password,
   * which PostgreSQL needs in clear: the file is readable by the cluster's OS user only) in a file of its own
   * that postgresql.conf includes.
   */
  private configureStandby(row: ReplicaRow, dataDir: string, password: string): void {
    const primary = new URL(this.cluster.adminUrl);
    const conninfo = [
      "host=127.0.0.1",
      `port=${primary.port || 5432}`,
      `user=${row.role_name}`,
      `password=${password}`,
      `application_name=${row.identifier}`,
    ].join(" ");
    const settings = [
      "# Written by Strata: this cluster is a read replica of the embedded cluster.",
      `primary_conninfo = '${conninfo}'`,
      `primary_slot_name = '${row.slot_name}'`,
      // Segments the slot no longer holds are read from the archive.
      `restore_command = '${restoreCommand(this.cluster.archiveDir).replace(/'/g, "''")}'`,
      "hot_standby = on",
      "",
    ].join("\n");
    const owner = clusterOwner();
    const file = path.join(dataDir, "strata-standby.conf");
    writeFileSync(file, settings, { mode: 0o600 });
    writeFileSync(path.join(dataDir, "standby.signal"), "", { mode: 0o600 });
    appendFileSync(path.join(dataDir, "postgresql.conf"), "\ninclude_if_exists = 'strata-standby.conf'\n");
    if (owner)
      for (const name of ["strata-standby.conf", "standby.signal"])
        chownSync(path.join(dataDir, name), owner.uid, owner.gid);
  }

  private async waitStreaming(row: ReplicaRow): Promise<void> {
    const until = Date.now() + STREAMING_WAIT_MS;
    for (;;) {
      const { rows } = await this.onPrimary((c) =>
        c.query("select state from pg_stat_replication where application_name = $1", [row.identifier]),
      );
      if (rows[0]?.state === "streaming") return;
      if (Date.now() > until)
        throw new Error(`the standby did not start streaming within ${STREAMING_WAIT_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** Stops the standby and removes its slot, role and files. */
  private async takeApart(row: ReplicaRow): Promise<void> {
    const proc = this.processes.get(row.identifier);
    this.stopping.add(row.identifier);
    this.processes.delete(row.identifier);
    await proc?.stop();
    this.stopping.delete(row.identifier);
    await this.onPrimary(async (c) => {
      // A walsender still attached (a standby stopped by another process) would keep the slot active.
      await c.query(
        "select pg_terminate_backend(active_pid) from pg_replication_slots where slot_name = $1 and active_pid is not null",
        [row.slot_name],
      );
      for (let i = 0; i < 50; i++) {
        const { rows } = await c.query("select active from pg_replication_slots where slot_name = $1", [
          row.slot_name,
        ]);
        if (!rows[0]) break;
        if (!rows[0].active) {
          await c.query("select pg_drop_replication_slot($1)", [row.slot_name]);
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      await runUtilityStatement(c, "drop role if exists %I", [row.role_name]);
    });
    const dir = path.join(this.cluster.dataDir, row.location);
    if (existsSync(dir)) await rm(dir, { recursive: true, force: true });
  }

  /** Stops and deletes a replica of the project; undefined when the project has none by that identifier. */
  async remove(ref: string, identifier: string): Promise<ReplicaRow | undefined> {
    const { rows } = await this.platformPool.query<ReplicaRow>(
      `update platform.read_replicas set status = 'GOING_DOWN', updated_at = now()
        where project_ref = $1 and identifier = $2 and status <> 'COMING_UP' returning *`,
      [ref, identifier],
    );
    const row = rows[0];
    if (!row) return undefined;
    // Reads leave the replica before it stops.
    await this.touch(ref);
    await this.takeApart(row);
    await this.platformPool.query("delete from platform.read_replicas where id = $1", [row.id]);
    await this.touch(ref);
    return row;
  }

  /** Takes apart every replica of a project being deleted (after any still being made is up). */
  async removeAll(ref: string): Promise<void> {
    await Promise.allSettled([...this.building]);
    const { rows } = await this.platformPool.query<ReplicaRow>(
      "select * from platform.read_replicas where project_ref = $1",
      [ref],
    );
    for (const row of rows) {
      await this.takeApart(row);
      await this.platformPool.query("delete from platform.read_replicas where id = $1", [row.id]);
    }
  }

  /** A replica of the project that is still being made (remove must wait for it). */
  async comingUp(ref: string, identifier: string): Promise<boolean> {
    const { rows } = await this.platformPool.query(
      "select 1 from platform.read_replicas where project_ref = $1 and identifier = $2 and status = 'COMING_UP'",
      [ref, identifier],
    );
    return rows.length > 0;
  }
}
