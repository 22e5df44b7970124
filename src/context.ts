import type pg from "pg";
import type { StrataConfig } from "./config";
import type { Logger } from "./log";
import type { ProjectRegistry } from "./projects/registry";
import type { ClusterAccess } from "./projects/access";
import type { EmbeddedClusters } from "./projects/embeddedClusters";
import type { ReplicaManager } from "./projects/replicas";
import type { UsageRecorder } from "./projects/usage";
import type { LogRecorder } from "./logs/recorder";

/**
 * What every part of the HTTP layer is given: configuration, logs, the control plane and the projects. It
 * imports no layer above it: a service or background job that hands itself around adds its own field here
 * from its module (`declare module ".../context"`: storage's byte backend, realtime's server, backups,
 * upgrades, the cluster's disk guard), and src/app.ts sets it.
 */
export interface AppContext {
  config: StrataConfig;
  log: Logger;
  /** Superuser pool on the control plane's own database (schema `platform`); no project role can connect to it. */
  platformPool: pg.Pool;
  /** Superuser URL of the main database (the default project's). */
  adminUrl: string;
  /** Superuser URL of the control plane's database. */
  controlUrl: string;
  registry: ProjectRegistry;
  /** Counts data requests per project for usage analytics (absent in CLI commands that serve nothing). */
  usage?: UsageRecorder;
  /** Records each project's API requests as log events (absent in CLI commands that serve nothing). */
  logs?: LogRecorder;
  /** Sends what database webhooks queue; told when a project enables them. */
  webhooks?: { refresh(): void };
  /** Access rules (pg_hba.conf) of the cluster Strata runs itself; absent with DATABASE_URL. */
  access?: ClusterAccess;
  /**
   * The access rules (pg_hba.conf) of a cluster Strata runs: the main embedded one (`access`) or an upgrade
   * cluster; undefined for a cluster that is not Strata's (DATABASE_URL).
   */
  accessOf?: (clusterId: string) => ClusterAccess | undefined;
  /** Clusters of newer PostgreSQL majors Strata runs for upgraded projects (absent with DATABASE_URL). */
  embeddedClusters?: EmbeddedClusters;
  /** Read replicas of the embedded cluster (absent with DATABASE_URL and in CLI commands that serve nothing). */
  replicas?: ReplicaManager;
  /** Restarts the embedded cluster Strata runs (absent with DATABASE_URL: that cluster is not Strata's). */
  restartCluster?: () => Promise<void>;
  /** Why the embedded cluster is down now, while its supervisor restarts it (absent with DATABASE_URL). */
  databaseDown?: () => string | undefined;
  /** False while the server is still starting (listening, but the default project not opened yet). */
  ready?: boolean;
}
