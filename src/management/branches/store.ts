import type pg from "pg";
import { allRows, firstRow } from "../rows";

type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/** A branch row with what the API shows of its own project. */
export interface BranchRow {
  id: string;
  name: string;
  project_ref: string;
  parent_project_ref: string;
  git_branch: string | null;
  pr_number: number | null;
  persistent: boolean;
  with_data: boolean;
  notify_url: string | null;
  status: string;
  review_requested_at: Date | null;
  deletion_scheduled_at: Date | null;
  created_at: Date;
  updated_at: Date;
  /** The branch project's status (ACTIVE_HEALTHY, COMING_UP, ...). */
  project_status: string;
  /** The caller's role in the branch's organization. */
  role_name: string;
}

const SELECT = `
  select b.*, p.status as project_status, m.role_name
    from platform.branches b
    join platform.projects p on p.ref = b.project_ref
    join platform.organization_members m on m.organization_id = p.organization_id and m.user_id = $1`;

export async function listBranches(db: Queryable, userId: string, parentRef: string): Promise<BranchRow[]> {
  return allRows(db, `${SELECT} where b.parent_project_ref = $2 order by b.created_at, b.id`, [
    userId,
    parentRef,
  ]);
}

export async function branchByName(
  db: Queryable,
  userId: string,
  parentRef: string,
  name: string,
): Promise<BranchRow | undefined> {
  return firstRow(db, `${SELECT} where b.parent_project_ref = $2 and b.name = $3`, [userId, parentRef, name]);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A branch by its project ref or (deprecated) its id, among the caller's organizations. */
export async function branchByIdOrRef(
  db: Queryable,
  userId: string,
  idOrRef: string,
  onlyOrganization: string | null = null,
): Promise<BranchRow | undefined> {
  const column = /^[a-z]{20}$/.test(idOrRef)
    ? "b.project_ref"
    : UUID.test(idOrRef)
      ? "b.id::text"
      : undefined;
  if (!column) return undefined;
  return firstRow(db, `${SELECT} where ${column} = $2 and ($3::uuid is null or p.organization_id = $3)`, [
    userId,
    idOrRef,
    onlyOrganization,
  ]);
}

export async function insertBranch(
  db: Queryable,
  b: {
    projectRef: string;
    parentRef: string;
    name: string;
    gitBranch?: string;
    persistent: boolean;
    withData: boolean;
    notifyUrl?: string;
  },
): Promise<string> {
  const { rows } = await db.query(
    `insert into platform.branches (project_ref, parent_project_ref, name, git_branch, persistent, with_data, notify_url)
     values ($1, $2, $3, $4, $5, $6, $7) returning id`,
    [b.projectRef, b.parentRef, b.name, b.gitBranch ?? null, b.persistent, b.withData, b.notifyUrl ?? null],
  );
  return rows[0].id;
}

/** Whether `ref` is a branch of another project. */
export async function isBranch(db: Queryable, ref: string): Promise<boolean> {
  const { rowCount } = await db.query("select 1 from platform.branches where project_ref = $1", [ref]);
  return Boolean(rowCount);
}

/** Whether the parent has a branch named `name`, locked until the caller's transaction ends. */
export async function lockBranchName(db: Queryable, parentRef: string, name: string): Promise<boolean> {
  const { rowCount } = await db.query(
    "select 1 from platform.branches where parent_project_ref = $1 and name = $2 for update",
    [parentRef, name],
  );
  return Boolean(rowCount);
}

/** The project row of a new branch, COMING_UP in its parent's organization and cluster. */
export async function insertBranchProject(
  db: Queryable,
  project: { ref: string; name: string; sealedJwtSecret: string; parentRef: string },
): Promise<void> {
  await db.query(
    `insert into platform.projects (ref, name, organization_id, cluster_id, database_name, status, jwt_secret)
     select $1, $2, organization_id, cluster_id, $3, 'COMING_UP', $4 from platform.projects where ref = $5`,
    [project.ref, project.name, `project_${project.ref}`, project.sealedJwtSecret, project.parentRef],
  );
}

export async function setBranchStatus(db: Queryable, id: string, status: string): Promise<void> {
  await db.query("update platform.branches set status = $2, updated_at = now() where id = $1", [id, status]);
}

export async function updateBranch(
  db: Queryable,
  id: string,
  changes: {
    name?: string;
    git_branch?: string;
    notify_url?: string;
    persistent?: boolean;
    status?: string;
    request_review?: boolean;
  },
): Promise<void> {
  await db.query(
    `update platform.branches set
        name = coalesce($2, name), git_branch = coalesce($3, git_branch), notify_url = coalesce($4, notify_url),
        persistent = coalesce($5, persistent), status = coalesce($6, status),
        review_requested_at = case when $7::boolean is null then review_requested_at
                                   when $7 then coalesce(review_requested_at, now()) else null end,
        updated_at = now()
      where id = $1`,
    [
      id,
      changes.name ?? null,
      changes.git_branch ?? null,
      changes.notify_url ?? null,
      changes.persistent ?? null,
      changes.status ?? null,
      changes.request_review ?? null,
    ],
  );
}

export async function scheduleDeletion(db: Queryable, id: string, at: Date | null): Promise<void> {
  await db.query(
    "update platform.branches set deletion_scheduled_at = $2, updated_at = now() where id = $1",
    [id, at],
  );
}

/** Branches whose scheduled deletion is due. */
export async function dueDeletions(db: Queryable): Promise<{ id: string; project_ref: string }[]> {
  return allRows(
    db,
    "select id, project_ref from platform.branches where deletion_scheduled_at <= now() order by deletion_scheduled_at",
  );
}

/** The refs of a project's branches (deleted with it). */
export async function branchRefsOf(db: Queryable, parentRef: string): Promise<string[]> {
  const { rows } = await db.query(
    "select project_ref from platform.branches where parent_project_ref = $1 order by created_at",
    [parentRef],
  );
  return rows.map((r) => r.project_ref);
}

// ----------------------------------------------------------------------------------------------- action runs

export const STEP_STATUSES = [
  "CREATED",
  "DEAD",
  "EXITED",
  "PAUSED",
  "REMOVING",
  "RESTARTING",
  "RUNNING",
] as const;
export const STEP_NAMES = ["clone", "pull", "health", "configure", "migrate", "seed", "deploy"] as const;
export type StepName = (typeof STEP_NAMES)[number];
export type StepStatus = (typeof STEP_STATUSES)[number];

export interface RunStep {
  name: StepName;
  status: StepStatus;
  created_at: string;
  updated_at: string;
}

export interface ActionRunRow {
  id: string;
  branch_id: string;
  kind: string;
  run_steps: RunStep[];
  logs: string;
  created_at: Date;
  updated_at: Date;
}

export async function insertRun(
  db: Queryable,
  branchId: string,
  kind: string,
  steps: StepName[],
): Promise<string> {
  const now = new Date().toISOString();
  const runSteps: RunStep[] = steps.map((name) => ({
    name,
    status: "CREATED",
    created_at: now,
    updated_at: now,
  }));
  const { rows } = await db.query(
    "insert into platform.action_runs (branch_id, kind, run_steps) values ($1, $2, $3) returning id",
    [branchId, kind, JSON.stringify(runSteps)],
  );
  return rows[0].id;
}

/** Sets the status of some steps of a run (one statement, so concurrent updates of other steps keep theirs). */
export async function setStepStatuses(
  db: Queryable,
  runId: string,
  statuses: Partial<Record<StepName, StepStatus>>,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `update platform.action_runs set updated_at = now(), run_steps = (
        select coalesce(jsonb_agg(case when $2::jsonb ? (s->>'name')
                 then s || jsonb_build_object('status', $2::jsonb->>(s->>'name'), 'updated_at', to_jsonb(now()))
                 else s end order by i), '[]')
          from jsonb_array_elements(run_steps) with ordinality as e(s, i))
      where id = $1`,
    [runId, JSON.stringify(statuses)],
  );
  return rowCount === 1;
}

export async function appendLog(db: Queryable, runId: string, line: string): Promise<void> {
  await db.query("update platform.action_runs set logs = logs || $2, updated_at = now() where id = $1", [
    runId,
    `${new Date().toISOString()} ${line}\n`,
  ]);
}

/** Runs of the branches of `ref`, or of the branch that `ref` is, newest first. */
export async function listRuns(
  db: Queryable,
  ref: string,
  offset: number,
  limit: number,
): Promise<ActionRunRow[]> {
  return allRows(
    db,
    `select r.* from platform.action_runs r join platform.branches b on b.id = r.branch_id
      where b.project_ref = $1 or b.parent_project_ref = $1
      order by r.created_at desc, r.id offset $2 limit $3`,
    [ref, offset, limit],
  );
}

export async function findRun(db: Queryable, ref: string, runId: string): Promise<ActionRunRow | undefined> {
  if (!UUID.test(runId)) return undefined;
  return firstRow(
    db,
    `select r.* from platform.action_runs r join platform.branches b on b.id = r.branch_id
      where r.id = $2 and (b.project_ref = $1 or b.parent_project_ref = $1)`,
    [ref, runId],
  );
}
