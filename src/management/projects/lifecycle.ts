import type pg from "pg";
import type { AppContext } from "../../context";
import {
  closeProjectDatabase,
  createProjectDatabase,
  dropProjectDatabase,
  openProjectDatabase,
} from "../../projects/clusters";
import { HttpError } from "../http";
import { deleteProjectRow, setStatus, touchProject, type ProjectRow } from "./store";

const LIFECYCLE_LOCK = 7_305_100;

/**
 * Runs a lifecycle change of one project while holding its advisory lock on the control plane, so pause,
 * restore, cancel and delete of one project never interleave, whichever Strata process receives them.
 */
async function withProjectLock<T>(
  ctx: AppContext,
  project: ProjectRow,
  work: (c: pg.PoolClient) => Promise<T>,
) {
  const client = await ctx.platformPool.connect();
  try {
    await client.query("select pg_advisory_lock($1, $2)", [LIFECYCLE_LOCK, project.id]);
    try {
      return await work(client);
    } finally {
      await client.query("select pg_advisory_unlock($1, $2)", [LIFECYCLE_LOCK, project.id]);
    }
  } finally {
    client.release();
  }
}

function refuseDefault(project: ProjectRow, action: string): void {
  if (project.is_default)
    throw new HttpError(400, `The default project lives in Strata's main database and cannot be ${action}`);
}

/** COMING_UP → ACTIVE_HEALTHY once its database exists and is bootstrapped; INIT_FAILED (nothing left) else. */
export async function provisionProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  try {
    await createProjectDatabase(project.cluster, project.database_name);
    await setStatus(ctx.platformPool, project.ref, ["COMING_UP"], "ACTIVE_HEALTHY");
  } catch (e) {
    ctx.log.error({ ref: project.ref, err: (e as Error).message }, "project provisioning failed");
    await dropProjectDatabase(project.cluster, project.database_name).catch(() => {});
    await setStatus(ctx.platformPool, project.ref, ["COMING_UP"], "INIT_FAILED").catch(() => {});
  }
}

/** ACTIVE_HEALTHY → INACTIVE: the database refuses new connections and its sessions end. */
export function pauseProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  refuseDefault(project, "paused");
  return withProjectLock(ctx, project, async (db) => {
    if (
      !(await setStatus(db, project.ref, ["ACTIVE_HEALTHY", "ACTIVE_UNHEALTHY", "PAUSE_FAILED"], "PAUSING"))
    )
      throw new HttpError(400, `Project ${project.ref} is not active and cannot be paused`);
    await ctx.registry.evict(project.ref);
    try {
      await closeProjectDatabase(project.cluster, project.database_name);
    } catch (e) {
      await setStatus(db, project.ref, ["PAUSING"], "PAUSE_FAILED");
      throw e;
    }
    await setStatus(db, project.ref, ["PAUSING"], "INACTIVE");
  });
}

/** INACTIVE → ACTIVE_HEALTHY with its data as it was: the database accepts connections again. */
export function restoreProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  return withProjectLock(ctx, project, async (db) => {
    if (!(await setStatus(db, project.ref, ["INACTIVE", "RESTORE_FAILED"], "RESTORING")))
      throw new HttpError(400, `Project ${project.ref} is not paused and cannot be restored`);
    try {
      await openProjectDatabase(project.cluster, project.database_name);
    } catch (e) {
      await setStatus(db, project.ref, ["RESTORING"], "RESTORE_FAILED");
      throw e;
    }
    await setStatus(db, project.ref, ["RESTORING"], "ACTIVE_HEALTHY");
  });
}

/** A restore that did not finish (RESTORING, RESTORE_FAILED) goes back to INACTIVE, connections closed. */
export function cancelRestore(ctx: AppContext, project: ProjectRow): Promise<void> {
  return withProjectLock(ctx, project, async (db) => {
    if (!(await setStatus(db, project.ref, ["RESTORING", "RESTORE_FAILED"], "INACTIVE")))
      throw new HttpError(400, `Project ${project.ref} has no restore in progress`);
    await closeProjectDatabase(project.cluster, project.database_name);
  });
}

/** Drops the project's database and its row; the row stays when the drop fails. */
export function deleteProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  refuseDefault(project, "deleted");
  return withProjectLock(ctx, project, async (db) => {
    await db.query("begin");
    try {
      await deleteProjectRow(db, project.ref);
      await ctx.registry.evict(project.ref);
      await dropProjectDatabase(project.cluster, project.database_name);
      await db.query("commit");
    } catch (e) {
      await db.query("rollback");
      throw e;
    }
  });
}

/**
 * Rebuilds an active project's APIs: this process forgets its schema at once; touching the row notifies every
 * process (this one included), which drops the project's runtime, so pools and caches are rebuilt on next use.
 */
export async function restartProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  if (project.status !== "ACTIVE_HEALTHY")
    throw new HttpError(400, `Project ${project.ref} is not active and cannot be restarted`);
  (await ctx.registry.get(project.ref))?.invalidateSchema("restart");
  await touchProject(ctx.platformPool, project.ref);
}
