import type pg from "pg";
import type { StrataConfig } from "./config";
import type { Logger } from "./log";
import type { ProjectRegistry } from "./projects/registry";

/** What every part of the HTTP layer is given: configuration, logs, the control plane and the projects. */
export interface AppContext {
  config: StrataConfig;
  log: Logger;
  /** Superuser pool on the main database (the control plane lives in its `platform` schema). */
  platformPool: pg.Pool;
  /** Superuser URL of the main database. */
  adminUrl: string;
  registry: ProjectRegistry;
}
