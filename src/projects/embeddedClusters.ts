import path from "node:path";
import type pg from "pg";
import {
  availableBinaries,
  startClusterFromBinaries,
  type PostgresBinaries,
  type RunningCluster,
} from "../db/embeddedCluster";
import type { Logger } from "../log";
import { randomSecret } from "../platform/ids";
import { kekOf } from "../platform/kek";
import { ClusterAccess } from "./access";
import { clusterOfRow, type Cluster } from "./clusters";

/**
 * The clusters of newer PostgreSQL majors that Strata runs itself beside the main embedded one: made when
 * the first project is upgraded to that major (rows of platform.clusters with `embedded_major`), then
 * started with every server start, like the main cluster. Data in `STRATA_DATA_DIR/pgdata-<major>`.
 */
export class EmbeddedClusters {
  private readonly running = new Map<string, Promise<RunningCluster>>();
  /** Each running cluster's access rules (pg_hba.conf: network restrictions, SSL, bans, JIT logins). */
  private readonly access = new Map<string, ClusterAccess>();

  constructor(
    private readonly platformPool: pg.Pool,
    private readonly opts: {
      dataDir: string;
      listenAddresses: string;
      /** Port of a cluster made from now on (kept in its row afterwards). */
      port: number;
      /** The main embedded cluster's id: its region and authenticator password are shared. */
      mainClusterId: string;
      log: Logger;
      /** Called with each cluster's access rules before they are first written (log readers, expiry). */
      prepareAccess?: (access: ClusterAccess) => void;
    },
  ) {}

  static clusterId(major: number): string {
    return `local-pg${major}`;
  }

  private databaseDir(major: number): string {
    return path.join(this.opts.dataDir, `pgdata-${major}`);
  }

  /** Starts every registered cluster whose binaries are here; one that cannot start is logged, not fatal. */
  async startRegistered(): Promise<void> {
    const { rows } = await this.platformPool.query(
      "select id, embedded_major from platform.clusters where embedded_major is not null order by id",
    );
    for (const row of rows) {
      await this.start(row.id, row.embedded_major).catch((e: Error) =>
        this.opts.log.error(
          { cluster: row.id, err: e.message },
          "an embedded cluster of projects upgraded to a newer PostgreSQL did not start; its projects are unavailable",
        ),
      );
    }
  }

  private async row(id: string): Promise<Cluster | undefined> {
    const { rows } = await this.platformPool.query(
      `select id as cluster_id, region, admin_url, authenticator_password from platform.clusters where id = $1`,
      [id],
    );
    return rows[0] && clusterOfRow(rows[0], kekOf(this.platformPool));
  }

  private start(id: string, major: number): Promise<RunningCluster> {
    let running = this.running.get(id);
    if (!running) {
      running = (async () => {
        const binaries = availableBinaries().find((b) => b.major === major);
        if (!binaries) throw new Error(`no PostgreSQL ${major} binaries are installed`);
        const cluster = await this.row(id);
        if (!cluster) throw new Error(`cluster ${id} is not registered`);
        const url = new URL(cluster.adminUrl);
        const databaseDir = this.databaseDir(major);
        const access = new ClusterAccess(this.platformPool, id, cluster.adminUrl, databaseDir, this.opts.log);
        const started = await startClusterFromBinaries({
          binaries,
          databaseDir,
          strataDataDir: this.opts.dataDir,
          port: Number(url.port),
          password: decodeURIComponent(url.password),
          listenAddresses: this.opts.listenAddresses,
          onLog: (record) => {
            this.opts.log.debug(
              { postgres: record.message, severity: record.error_severity, cluster: id },
              "embedded postgres",
            );
            access.observeLog(record);
          },
          onState: (state) =>
            state.running
              ? this.opts.log.info({ cluster: id }, "an embedded cluster runs again")
              : this.opts.log.warn(
                  { cluster: id, reason: state.reason, retry_in_ms: state.retryInMs },
                  "an embedded cluster is down; restarting it",
                ),
        });
        // Its projects' network restrictions, SSL enforcement, bans and JIT logins, as on the main cluster.
        this.opts.prepareAccess?.(access);
        await access.apply();
        this.access.set(id, access);
        return started;
      })();
      this.running.set(id, running);
      running.catch(() => this.running.delete(id));
    }
    return running;
  }

  /**
   * The cluster of `binaries`' major, registered (its superuser password generated and kept sealed in its
   * row before initdb, so a failed first start can be retried) and running.
   */
  async ensure(binaries: PostgresBinaries): Promise<Cluster> {
    const id = EmbeddedClusters.clusterId(binaries.major);
    if (!(await this.row(id))) {
      const kek = kekOf(this.platformPool);
      const url = `postgres://postgres:${randomSecret(24)}@127.0.0.1:${this.opts.port}/postgres`;
      // The same region and authenticator password as the main cluster: a moved project keeps both.
      await this.platformPool.query(
        `insert into platform.clusters (id, region, admin_url, authenticator_password, embedded_major)
         select $1, region, $2, authenticator_password, $3 from platform.clusters where id = $4
         on conflict (id) do nothing`,
        [id, kek.seal(url, "platform.clusters.admin_url"), binaries.major, this.opts.mainClusterId],
      );
    }
    await this.start(id, binaries.major);
    return (await this.row(id))!;
  }

  /** True for the clusters this process runs (their data directories are on this machine). */
  manages(id: string): boolean {
    return this.running.has(id);
  }

  /** The access rules of a cluster this process runs. */
  accessOf(id: string): ClusterAccess | undefined {
    return this.access.get(id);
  }

  async stopAll(): Promise<void> {
    const all = [...this.running.values()];
    this.running.clear();
    for (const access of this.access.values()) access.stopExpiry();
    this.access.clear();
    await Promise.all(all.map((r) => r.then((c) => c.stop()).catch(() => {})));
  }
}
