import pg from "pg";
import type { AppContext } from "../../context";
import { removeProjectFunctions } from "../../functions/runtime";
import {
  closeProjectDatabase,
  createProjectDatabase,
  dropProjectRoles,
  dropProjectDatabase,
  openProjectDatabase,
  setOwnerLogin,
} from "../../projects/clusters";
import { HttpError } from "../http";
import { branchRefsOf } from "../branches/store";
import { applyStoredComputeLimit } from "../billing/compute";
import {
  deleteProjectRow,
  findAnyProject,
  projectsComingUp,
  setStatus,
  touchProject,
  type ProjectRow,
} from "./store";
import { withAdminTransaction } from "../../db/transaction";
import { oneOffClient } from "../../db/client";

const LIFECYCLE_LOCK = 7_305_100;

/**
 * Runs a lifecycle change of one project while holding its advisory lock on the control plane, so create,
 * pause, restore, cancel and delete of one project never interleave, whichever Strata process receives them.
 * The lock lives on a connection of its own, so long work (creating a database) never starves the pool.
 * With `tryOnly`, answers undefined at once when another session holds the lock.
 */
async function withProjectLock<T>(
  ctx: AppContext,
  project: ProjectRow,
  work: (c: pg.Client) => Promise<T>,
  tryOnly = false,
): Promise<T | undefined> {
  const client = oneOffClient({ connectionString: ctx.controlUrl });
  await client.connect();
  try {
    const lock = tryOnly ? "pg_try_advisory_lock" : "pg_advisory_lock";
    const { rows } = await client.query(`select ${lock}($1, $2) as locked`, [LIFECYCLE_LOCK, project.id]);
    if (rows[0].locked === false) return undefined;
    return await work(client);
  } finally {
    // Ending the session releases the lock.
    await client.end().catch(() => {});
  }
}

function refuseDefault(project: ProjectRow, action: string): void {
  if (project.is_default)
    throw new HttpError(400, `The default project lives in Strata's main database and cannot be ${action}`);
}

/**
 * COMING_UP → ACTIVE_HEALTHY once its database exists and is bootstrapped; INIT_FAILED (nothing left) else.
 * A database left half-made by a process that died while creating it is dropped and made again.
 */
export async function provisionProject(
  ctx: AppContext,
  project: ProjectRow,
  tryOnly = false,
  ownerPassword?: string,
): Promise<void> {
  await withProjectLock(
    ctx,
    project,
    async (db) => {
      // Another node may have finished it between the caller's look and this lock: its database stays, and
      // the creator still gives the owner its password.
      if (!(await isComingUp(db, project.ref))) {
        if (ownerPassword !== undefined) await setOwnerLogin(project.cluster, project.ref, ownerPassword);
        return;
      }
      try {
        await dropProjectDatabase(project.cluster, project.database_name);
        await createProjectDatabase(project.cluster, project.database_name);
        // Its roles, and the owner's db_pass, exist before the project is answered as active.
        await ctx.registry.prepare(project.ref);
        if (ownerPassword !== undefined) await setOwnerLogin(project.cluster, project.ref, ownerPassword);
        await applyStoredComputeLimit(ctx.platformPool, project.cluster.adminUrl, project.ref);
        await setStatus(db, project.ref, ["COMING_UP"], "ACTIVE_HEALTHY");
      } catch (e) {
        ctx.log.error({ ref: project.ref, err: (e as Error).message }, "project provisioning failed");
        await dropProjectDatabase(project.cluster, project.database_name).catch(() => {});
        await setStatus(db, project.ref, ["COMING_UP"], "INIT_FAILED").catch(() => {});
      }
    },
    tryOnly,
  ).catch((e) =>
    ctx.log.error({ ref: project.ref, err: (e as Error).message }, "project provisioning failed"),
  );
}

async function isComingUp(db: pg.Client, ref: string): Promise<boolean> {
  const { rows } = await db.query("select status from platform.projects where ref = $1", [ref]);
  return rows[0]?.status === "COMING_UP";
}

/** At start: finishes creating projects that no process is creating any more (their creator died). */
export async function resumeProvisioning(ctx: AppContext): Promise<void> {
  try {
    for (const project of await projectsComingUp(ctx.platformPool))
      await provisionProject(ctx, project, true);
  } catch (e) {
    ctx.log.error({ err: (e as Error).message }, "resuming project provisioning failed");
  }
}

/** Runs `work` while the project is in status `during`: then `done`, or `failed` if it throws. */
async function inStatus(
  db: pg.Client,
  ref: string,
  status: { during: string; failed: string; done: string },
  work: () => Promise<void>,
): Promise<void> {
  try {
    await work();
  } catch (e) {
    await setStatus(db, ref, [status.during], status.failed);
    throw e;
  }
  await setStatus(db, ref, [status.during], status.done);
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
    await inStatus(db, project.ref, { during: "PAUSING", failed: "PAUSE_FAILED", done: "INACTIVE" }, () =>
      closeProjectDatabase(project.cluster, project.database_name),
    );
  });
}

/** INACTIVE → ACTIVE_HEALTHY with its data as it was: the database accepts connections again. */
export function restoreProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  return withProjectLock(ctx, project, async (db) => {
    if (!(await setStatus(db, project.ref, ["INACTIVE", "RESTORE_FAILED"], "RESTORING")))
      throw new HttpError(400, `Project ${project.ref} is not paused and cannot be restored`);
    await inStatus(
      db,
      project.ref,
      { during: "RESTORING", failed: "RESTORE_FAILED", done: "ACTIVE_HEALTHY" },
      () => openProjectDatabase(project.cluster, project.database_name),
    );
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

/**
 * Drops the project's database, roles and row (its secrets, settings and backup rows go with it); the row
 * stays when the drop fails. Then its files. A project's branches are projects of their own and go first.
 */
export async function deleteProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  refuseDefault(project, "deleted");
  for (const ref of await branchRefsOf(ctx.platformPool, project.ref)) {
    const branch = await findAnyProject(ctx.platformPool, ref);
    if (branch) await deleteProject(ctx, branch);
  }
  // Its read replicas stop, and their slots, roles and files go.
  await ctx.replicas?.removeAll(project.ref);
  // The project's backups go with it (their rows with its row, their bytes once it is gone).
  const backups = (await ctx.backups?.locations(project.ref)) ?? [];
  await withProjectLock(ctx, project, (db) =>
    withAdminTransaction(db, async (client) => {
      await deleteProjectRow(client, project.ref);
      await ctx.registry.evict(project.ref);
      await dropProjectDatabase(project.cluster, project.database_name);
      await dropProjectRoles(project.cluster, project.ref);
    }),
  );
  // What the project kept outside its database: function bundles, stored objects, backups.
  await removeProjectFunctions(ctx, project.ref);
  await ctx.storage?.removeProject(project.ref);
  await ctx.backups?.store.remove(backups);
}

/**
 * Rebuilds an active project's APIs: this process retires the project's runtime at once; touching the row
 * notifies the other processes, which do the same, so pools and caches are rebuilt on next use.
 */
export async function restartProject(ctx: AppContext, project: ProjectRow): Promise<void> {
  if (project.status !== "ACTIVE_HEALTHY")
    throw new HttpError(400, `Project ${project.ref} is not active and cannot be restarted`);
  await touchProject(ctx.platformPool, project.ref);
  await ctx.registry.retire(project.ref);
}
