import type pg from "pg";
import type { StrataConfig } from "./config";
import type { Logger } from "./log";
import type { ProjectRegistry } from "./projects/registry";
import type { UsageRecorder } from "./projects/usage";
import type { ObjectBackend } from "./storage/backend/types";
import type { RealtimeServer } from "./realtime/socket";

/** What every part of the HTTP layer is given: configuration, logs, the control plane and the projects. */
export interface AppContext {
  config: StrataConfig;
  log: Logger;
  /** Superuser pool on the main database (the control plane lives in its `platform` schema). */
  platformPool: pg.Pool;
  /** Superuser URL of the main database. */
  adminUrl: string;
  registry: ProjectRegistry;
  /** Counts data requests per project for usage analytics (absent in CLI commands that serve nothing). */
  usage?: UsageRecorder;
  /** Sends what database webhooks queue; told when a project enables them. */
  webhooks?: { refresh(): void };
  /** Where storage keeps object bytes (absent in CLI commands that serve nothing). */
  storage?: ObjectBackend;
  /** Realtime's websocket server and channels (absent in CLI commands that serve nothing). */
  realtime?: RealtimeServer;
  /** Backups of project databases: on demand, scheduled, restored (absent in CLI commands that serve nothing). */
  backups?: import("./management/backups/service").BackupService;
  /** Restarts the embedded cluster Strata runs (absent with DATABASE_URL: that cluster is not Strata's). */
  restartCluster?: () => Promise<void>;
  /** False while the server is still starting (listening, but the default project not opened yet). */
  ready?: boolean;
}
