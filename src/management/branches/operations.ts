import type pg from "pg";
import type { AppContext } from "../../context";
import { oneOffClient } from "../../db/client";
import { dropProjectDatabase } from "../../projects/clusters";
import type { ProjectRuntime } from "../../projects/runtime";
import { fetchPublicJson } from "../../net/outbound";
import { withProjectSqlClient } from "../database/sqlRunner";
import { HttpError } from "../http";
import { deleteProject, pauseProject, provisionProject, restoreProject } from "../projects/lifecycle";
import { findAnyProject, setStatus, touchProject, type ProjectRow } from "../projects/store";
import {
  applyMigrations,
  appliedMigrations,
  copyData,
  pendingMigrations,
  recordedVersions,
  type Migration,
} from "./build";
import {
  appendLog,
  dueDeletions,
  insertRun,
  scheduleDeletion,
  setBranchStatus,
  setStepStatuses,
  type BranchRow,
  type StepName,
} from "./store";

/**
 * Sets a branch's status and tells its `notify_url`, if it has one, with a POST of
 * `{type: "branch.status", branch_id, project_ref, parent_project_ref, status}` (sent as auth hooks are: https
 * to a public address only; a failed delivery is logged, not retried).
 */
async function setStatusAndNotify(ctx: AppContext, branchId: string, status: string): Promise<void> {
  await setBranchStatus(ctx.platformPool, branchId, status);
  const { rows } = await ctx.platformPool.query(
    "select project_ref, parent_project_ref, notify_url from platform.branches where id = $1",
    [branchId],
  );
  const branch = rows[0];
  if (!branch?.notify_url) return;
  const body = JSON.stringify({
    type: "branch.status",
    branch_id: branchId,
    project_ref: branch.project_ref,
    parent_project_ref: branch.parent_project_ref,
    status,
  });
  await fetchPublicJson(branch.notify_url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  }).catch((e) =>
    ctx.log.warn({ branch: branch.project_ref, err: (e as Error).message }, "branch notify_url not reached"),
  );
}

/** A branch scheduled for deletion with `force=false` can be restored this long. */
export const DELETION_GRACE_MS = 60 * 60_000;
const BRANCH_LOCK = 7_305_700;

export type RunKind = "create" | "push" | "merge" | "reset";

/** The steps each operation goes through, in order. */
export function stepsOf(kind: RunKind, withData: boolean): StepName[] {
  switch (kind) {
    case "create":
    case "reset":
      return withData ? ["clone", "migrate", "seed", "health"] : ["clone", "migrate", "health"];
    case "push":
    case "merge":
      return ["migrate"];
  }
}

/** The project row of `ref` whoever's it is (the caller's membership was checked on the branch). */
async function projectRow(ctx: AppContext, ref: string): Promise<ProjectRow> {
  const row = await findAnyProject(ctx.platformPool, ref);
  if (!row) throw new Error(`project ${ref} is gone`);
  return row;
}

async function runtimeOf(ctx: AppContext, ref: string): Promise<ProjectRuntime> {
  const runtime = await ctx.registry.get(ref);
  if (!runtime) throw new Error(`project ${ref} is gone`);
  if (runtime.record.status !== "ACTIVE_HEALTHY")
    throw new Error(`project ${ref} is ${runtime.record.status}, not ACTIVE_HEALTHY`);
  return runtime;
}

/**
 * Operations on one branch never interleave, whichever Strata process runs them: they hold an advisory lock
 * on a connection of their own for their whole run.
 */
async function withBranchLock<T>(ctx: AppContext, branchRef: string, work: () => Promise<T>): Promise<T> {
  const client = oneOffClient({ connectionString: ctx.controlUrl });
  await client.connect();
  try {
    await client.query("select pg_advisory_lock($1, hashtext($2))", [BRANCH_LOCK, branchRef]);
    return await work();
  } finally {
    await client.end().catch(() => {});
  }
}

/** One action run: its steps move CREATED → RUNNING → EXITED (done) or DEAD (failed), each logged. */
class Run {
  constructor(
    private readonly db: pg.Pool,
    readonly id: string,
  ) {}

  log = (line: string) => appendLog(this.db, this.id, line);

  async step(name: StepName, work: () => Promise<void>): Promise<void> {
    await setStepStatuses(this.db, this.id, { [name]: "RUNNING" });
    await this.log(`${name}: started`);
    try {
      await work();
    } catch (e) {
      await setStepStatuses(this.db, this.id, { [name]: "DEAD" });
      await this.log(`${name}: failed: ${(e as Error).message}`);
      throw e;
    }
    await setStepStatuses(this.db, this.id, { [name]: "EXITED" });
    await this.log(`${name}: done`);
  }
}

/**
 * Starts an action run of `kind` on `branch` and runs it in the background; answers the run's id at once
 * (clients follow the run through GET /v1/projects/{ref}/actions/{run_id}).
 */
export async function startRun(
  ctx: AppContext,
  branch: Pick<BranchRow, "id" | "project_ref" | "parent_project_ref" | "with_data">,
  kind: RunKind,
  options: { migrationVersion?: string } = {},
): Promise<string> {
  const db = ctx.platformPool;
  const run = new Run(db, await insertRun(db, branch.id, kind, stepsOf(kind, branch.with_data)));
  void withBranchLock(ctx, branch.project_ref, async () => {
    await run.log(`${kind} of branch ${branch.project_ref} (parent ${branch.parent_project_ref})`);
    try {
      await OPERATIONS[kind](ctx, branch, run, options.migrationVersion);
      await run.log(`${kind}: finished`);
    } catch (e) {
      // The failed step is DEAD; steps that never ran stay CREATED.
      await run.log(`${kind}: failed`);
      ctx.log.warn({ branch: branch.project_ref, kind, err: (e as Error).message }, "branch action failed");
    }
  }).catch((e) => ctx.log.error({ err: (e as Error).message }, "branch action could not run"));
  return run.id;
}

type Operation = (
  ctx: AppContext,
  branch: Pick<BranchRow, "id" | "project_ref" | "parent_project_ref" | "with_data">,
  run: Run,
  migrationVersion?: string,
) => Promise<void>;

/** Builds the branch's database from nothing: bootstrap, the parent's migrations, its rows when asked. */
async function build(
  ctx: AppContext,
  branch: Pick<BranchRow, "id" | "project_ref" | "parent_project_ref" | "with_data">,
  run: Run,
  after: Migration[] = [],
): Promise<void> {
  await run.step("clone", async () => {
    await provisionProject(ctx, await projectRow(ctx, branch.project_ref));
    const row = await projectRow(ctx, branch.project_ref);
    if (row.status !== "ACTIVE_HEALTHY") throw new Error(`the branch's database could not be created`);
    // A runtime loaded while the database was being made knows it as COMING_UP: open it afresh.
    await ctx.registry.evict(branch.project_ref);
  });
  const parent = await runtimeOf(ctx, branch.parent_project_ref);
  const target = await runtimeOf(ctx, branch.project_ref);
  await setStatusAndNotify(ctx, branch.id, "RUNNING_MIGRATIONS");
  try {
    await run.step("migrate", async () => {
      await applyMigrations(target, await appliedMigrations(parent), run.log);
      await applyMigrations(target, after, run.log);
    });
  } catch (e) {
    await setStatusAndNotify(ctx, branch.id, "MIGRATIONS_FAILED");
    throw e;
  }
  await setStatusAndNotify(ctx, branch.id, "MIGRATIONS_PASSED");
  if (branch.with_data) await run.step("seed", () => copyData(parent, target, run.log));
  await run.step("health", async () => {
    await withProjectSqlClient(target, true, (c) => c.query("select 1"));
    await run.log(`branch ${branch.project_ref} answers`);
  });
}

const OPERATIONS: Record<RunKind, Operation> = {
  create: (ctx, branch, run) => build(ctx, branch, run),

  /** Applies the branch's recorded but unapplied migrations to the branch. */
  push: async (ctx, branch, run, version) => {
    const target = await runtimeOf(ctx, branch.project_ref);
    await migrateStep(ctx, branch, run, async () => {
      const pending = upTo(await pendingMigrations(target), version);
      await run.log(`${pending.length} pending migration(s) on the branch`);
      await applyMigrations(target, pending, run.log);
    });
  },

  /** Applies the branch's migrations that the parent lacks to the parent. */
  merge: async (ctx, branch, run, version) => {
    const parent = await runtimeOf(ctx, branch.parent_project_ref);
    const source = await runtimeOf(ctx, branch.project_ref);
    await migrateStep(ctx, branch, run, async () => {
      const missing = await newMigrations(source, parent, version);
      await run.log(`${missing.length} migration(s) of the branch to apply to the parent`);
      await applyMigrations(parent, missing, run.log);
    });
  },

  /**
   * Rebuilds the branch from its parent, keeping its ref, keys and host; with a migration version, the
   * branch's own migrations up to it are applied again afterwards.
   */
  reset: async (ctx, branch, run, version) => {
    const parent = await runtimeOf(ctx, branch.parent_project_ref);
    const own = version
      ? upTo(await newMigrations(await runtimeOf(ctx, branch.project_ref), parent, undefined), version)
      : [];
    const row = await projectRow(ctx, branch.project_ref);
    if (!(await setStatus(ctx.platformPool, row.ref, ["ACTIVE_HEALTHY"], "COMING_UP")))
      throw new Error("the branch is not active");
    await ctx.registry.evict(row.ref);
    await dropProjectDatabase(row.cluster, row.database_name);
    await run.log(`dropped the branch's database ${row.database_name}`);
    await build(ctx, branch, run, own);
  },
};

async function migrateStep(
  ctx: AppContext,
  branch: Pick<BranchRow, "id">,
  run: Run,
  work: () => Promise<void>,
): Promise<void> {
  await setStatusAndNotify(ctx, branch.id, "RUNNING_MIGRATIONS");
  try {
    await run.step("migrate", work);
  } catch (e) {
    await setStatusAndNotify(ctx, branch.id, "MIGRATIONS_FAILED");
    throw e;
  }
  await setStatusAndNotify(ctx, branch.id, "MIGRATIONS_PASSED");
}

function upTo(migrations: Migration[], version: string | undefined): Migration[] {
  return version ? migrations.filter((m) => m.version <= version) : migrations;
}

/** The migrations applied on `source` whose versions `target` has not recorded, up to `version`. */
async function newMigrations(
  source: ProjectRuntime,
  target: ProjectRuntime,
  version: string | undefined,
): Promise<Migration[]> {
  const known = await recordedVersions(target);
  return upTo(
    (await appliedMigrations(source)).filter((m) => !known.has(m.version)),
    version,
  );
}

/** A migration version named in a body must be one the branch has. */
export async function checkMigrationVersion(
  ctx: AppContext,
  branchRef: string,
  version: string | undefined,
): Promise<void> {
  if (version === undefined) return;
  const runtime = await ctx.registry.get(branchRef);
  if (!runtime || runtime.record.status !== "ACTIVE_HEALTHY")
    throw new HttpError(400, `Branch ${branchRef} is not active`);
  if (!(await recordedVersions(runtime)).has(version))
    throw new HttpError(400, `Branch ${branchRef} has no migration ${version}`);
}

/** Deletes a branch now: its database, roles and rows (the branch row and its runs go with the project). */
export async function deleteBranchNow(ctx: AppContext, branchRef: string): Promise<void> {
  const row = await findAnyProject(ctx.platformPool, branchRef);
  if (row) await deleteProject(ctx, row);
}

/** `force=false`: the branch is paused and deleted when the grace period ends, unless restored before. */
export async function scheduleBranchDeletion(ctx: AppContext, branch: BranchRow): Promise<void> {
  if (branch.deletion_scheduled_at) return;
  const row = await projectRow(ctx, branch.project_ref);
  if (row.status === "ACTIVE_HEALTHY") await pauseProject(ctx, row);
  await scheduleDeletion(ctx.platformPool, branch.id, new Date(Date.now() + DELETION_GRACE_MS));
}

/** Cancels a scheduled deletion: the branch is active again. */
export async function restoreBranch(ctx: AppContext, branch: BranchRow): Promise<void> {
  if (!branch.deletion_scheduled_at)
    throw new HttpError(400, `Branch ${branch.project_ref} is not scheduled for deletion`);
  const row = await projectRow(ctx, branch.project_ref);
  if (row.status === "INACTIVE") await restoreProject(ctx, row);
  await scheduleDeletion(ctx.platformPool, branch.id, null);
  await touchProject(ctx.platformPool, row.ref);
}

/** Deletes the branches whose grace period has ended; run every minute by the server. */
export async function deleteDueBranches(ctx: AppContext): Promise<void> {
  for (const due of await dueDeletions(ctx.platformPool)) {
    await deleteBranchNow(ctx, due.project_ref).catch((e) =>
      ctx.log.error(
        { branch: due.project_ref, err: (e as Error).message },
        "scheduled branch deletion failed",
      ),
    );
  }
}
