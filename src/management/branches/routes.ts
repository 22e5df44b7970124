import { Router, type Request } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { clusterVersion } from "../../projects/clusters";
import { newProjectRef, randomSecret } from "../../platform/ids";
import { kekOf } from "../../platform/kek";
import { withAdminTransaction } from "../../db/transaction";
import { checkRole, found, HttpError, mayReadSecrets, type Access } from "../http";
import { routeTable } from "../route";
import { findAnyProject } from "../projects/store";
import {
  checkMigrationVersion,
  deleteBranchNow,
  restoreBranch,
  scheduleBranchDeletion,
  startRun,
} from "./operations";
import {
  branchByIdOrRef,
  branchByName,
  findRun,
  insertBranch,
  insertBranchProject,
  isBranch,
  lockBranchName,
  listBranches,
  listRuns,
  setStepStatuses,
  STEP_NAMES,
  STEP_STATUSES,
  updateBranch,
  type ActionRunRow,
  type BranchRow,
} from "./store";

const READ: Access = {
  permission: { or: ["branching_production_read", "branching_development_read"] },
  scope: "environment:read",
};
const WRITE: Access = {
  permission: { or: ["branching_production_write", "branching_development_write"] },
  scope: "environment:write",
};

const BRANCH_STATUSES = [
  "CREATING_PROJECT",
  "RUNNING_MIGRATIONS",
  "MIGRATIONS_PASSED",
  "MIGRATIONS_FAILED",
  "FUNCTIONS_DEPLOYED",
  "FUNCTIONS_FAILED",
] as const;

const branchShape = z.object({
  id: z.string(),
  name: z.string(),
  project_ref: z.string(),
  parent_project_ref: z.string(),
  is_default: z.boolean(),
  git_branch: z.string().optional(),
  pr_number: z.number().int().optional(),
  persistent: z.boolean(),
  status: z.enum(BRANCH_STATUSES),
  created_at: z.string(),
  updated_at: z.string(),
  review_requested_at: z.string().optional(),
  deletion_scheduled_at: z.string().optional(),
  with_data: z.boolean(),
  notify_url: z.string().optional(),
  preview_project_status: z.string(),
});

const branchConfigShape = z.object({
  ref: z.string(),
  postgres_version: z.string(),
  sql_version: z.string(),
  postgres_engine: z.string(),
  sql_engine: z.string(),
  release_channel: z.string(),
  status: z.string(),
  db_host: z.string(),
  db_port: z.number().int(),
  db_user: z.string(),
  jwt_secret: z.string().optional(),
});

const runShape = z.object({
  id: z.string(),
  branch_id: z.string(),
  run_steps: z.array(
    z.object({
      name: z.enum(STEP_NAMES),
      status: z.enum(STEP_STATUSES),
      created_at: z.string(),
      updated_at: z.string(),
    }),
  ),
  git_config: z.null(),
  workdir: z.null(),
  check_run_id: z.null(),
  created_at: z.string(),
  updated_at: z.string(),
});

const name = z
  .string()
  .min(1, "must not be empty")
  .max(255)
  .regex(/^[^/\s][^/]*$/, "must not contain '/' or start with a space");

const createBody = z.object({
  branch_name: name,
  git_branch: z.string().max(255).optional(),
  is_default: z.literal(false, { error: "a branch cannot be made the default branch" }).optional(),
  persistent: z.boolean().optional(),
  with_data: z.boolean().optional(),
  notify_url: z.url({ protocol: /^https?$/ }).optional(),
});

const updateBody = z
  .object({
    branch_name: name.optional(),
    git_branch: z.string().max(255).optional(),
    notify_url: z.url({ protocol: /^https?$/ }).optional(),
    reset_on_push: z.boolean().optional(),
    persistent: z.boolean().optional(),
    request_review: z.boolean().optional(),
    status: z.enum(BRANCH_STATUSES).optional(),
  })
  .strict();

const migrationBody = z.object({ migration_version: z.string().regex(/^\d+$/).optional() }).strict();
const workflowResponse = z.object({ workflow_run_id: z.string(), message: z.string() });

function branchJson(b: BranchRow): z.infer<typeof branchShape> {
  return {
    id: b.id,
    name: b.name,
    project_ref: b.project_ref,
    parent_project_ref: b.parent_project_ref,
    is_default: false,
    ...(b.git_branch !== null ? { git_branch: b.git_branch } : {}),
    ...(b.pr_number !== null ? { pr_number: b.pr_number } : {}),
    persistent: b.persistent,
    status: b.status as never,
    created_at: b.created_at.toISOString(),
    updated_at: b.updated_at.toISOString(),
    ...(b.review_requested_at ? { review_requested_at: b.review_requested_at.toISOString() } : {}),
    ...(b.deletion_scheduled_at ? { deletion_scheduled_at: b.deletion_scheduled_at.toISOString() } : {}),
    with_data: b.with_data,
    ...(b.notify_url !== null ? { notify_url: b.notify_url } : {}),
    preview_project_status: b.project_status,
  };
}

function runJson(r: ActionRunRow): z.infer<typeof runShape> {
  return {
    id: r.id,
    branch_id: r.branch_id,
    run_steps: r.run_steps,
    git_config: null,
    workdir: null,
    check_run_id: null,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

/** Branches and their action runs: each branch is a project of its own, made from its parent. */
export function branchRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const db = ctx.platformPool;

  /** The branch `/v1/branches/{id_or_ref}` names, checked against the caller's role there. */
  async function addressedBranch(req: Request, idOrRef: string, access: Access): Promise<BranchRow> {
    const branch = found(
      await branchByIdOrRef(db, req.principal!.userId, idOrRef, req.principal!.organizationId),
      "Branch",
      idOrRef,
    );
    checkRole(branch.role_name, access.permission!);
    return branch;
  }

  routes.get(
    "/v1/projects/:ref/branches",
    "Lists the project's branches",
    { project: "any", access: READ, status: 200, response: branchShape.array() },
    async ({ req, project }) => (await listBranches(db, req.principal!.userId, project.ref)).map(branchJson),
  );

  routes.post(
    "/v1/projects/:ref/branches",
    "Creates a branch: a project of its own whose database gets the parent's applied migrations (and its rows with with_data)",
    {
      feature: { name: "branching" },
      project: "database",
      access: WRITE,
      body: createBody,
      status: 201,
      response: branchShape,
    },
    async ({ req, project, body }) => {
      const parent = (await findAnyProject(db, project.ref))!;
      if (await isBranch(db, parent.ref))
        throw new HttpError(400, "A branch cannot have branches of its own");
      const ref = newProjectRef();
      const id = await withAdminTransaction(db, async (client) => {
        if (await lockBranchName(client, parent.ref, body.branch_name))
          throw new HttpError(409, `Branch ${body.branch_name} already exists`);
        await insertBranchProject(client, {
          ref,
          name: body.branch_name,
          sealedJwtSecret: kekOf(db).seal(randomSecret(32), "platform.projects.jwt_secret"),
          parentRef: parent.ref,
        });
        return insertBranch(client, {
          projectRef: ref,
          parentRef: parent.ref,
          name: body.branch_name,
          gitBranch: body.git_branch,
          persistent: body.persistent ?? false,
          withData: body.with_data ?? false,
          notifyUrl: body.notify_url,
        });
      });
      await startRun(
        ctx,
        { id, project_ref: ref, parent_project_ref: parent.ref, with_data: body.with_data ?? false },
        "create",
      );
      return branchJson((await branchByIdOrRef(db, req.principal!.userId, ref))!);
    },
  );

  routes.delete(
    "/v1/projects/:ref/branches",
    "Disables branching: deletes every branch of the project",
    { project: "any", access: WRITE, status: 200 },
    async ({ req, project }) => {
      for (const b of await listBranches(db, req.principal!.userId, project.ref))
        await deleteBranchNow(ctx, b.project_ref);
      return {};
    },
  );

  routes.get(
    "/v1/projects/:ref/branches/:name",
    "Gets a branch by name",
    { project: "any", access: READ, status: 200, response: branchShape },
    async ({ req, project, params }) => {
      const branch = found(
        await branchByName(db, req.principal!.userId, project.ref, params.name),
        "Branch",
        params.name,
      );
      return branchJson(branch);
    },
  );

  routes.get(
    "/v1/branches/:branch_id_or_ref",
    "Gets a branch's connection details (the JWT secret only for callers who may read secrets)",
    { access: READ, status: 200, response: branchConfigShape },
    async ({ req, params }) => {
      const branch = await addressedBranch(req, params.branch_id_or_ref, READ);
      const row = (await findAnyProject(db, branch.project_ref))!;
      const version = await clusterVersion(row.cluster);
      const url = new URL(row.cluster.adminUrl);
      const runtime = await ctx.registry.get(branch.project_ref);
      const secrets = mayReadSecrets({ principal: req.principal, membership: { role: branch.role_name } });
      // Clients reach the branch's database as they reach any project's (the pooler config's connection): through
      // the database listener when it runs, which takes any database name (the CLI's `branches get` says
      // `postgres`), else on the cluster itself as the branch's owner role.
      const listener = ctx.dbListener;
      return {
        ref: branch.project_ref,
        postgres_version: version,
        sql_version: version,
        postgres_engine: "postgres",
        sql_engine: "postgres",
        release_channel: "ga",
        status: row.status,
        db_host: listener?.host ?? url.hostname,
        db_port: listener?.port ?? Number(url.port || 5432),
        db_user: listener ? `postgres.${branch.project_ref}` : `postgres_${branch.project_ref}`,
        ...(secrets && runtime ? { jwt_secret: runtime.record.jwtSecret } : {}),
      };
    },
  );

  routes.patch(
    "/v1/branches/:branch_id_or_ref",
    "Updates a branch: name, git branch, notify URL, persistence, review request, status",
    { access: WRITE, body: updateBody, status: 200, response: branchShape },
    async ({ req, params, body }) => {
      const branch = await addressedBranch(req, params.branch_id_or_ref, WRITE);
      if (body.branch_name && body.branch_name !== branch.name) {
        const taken = await branchByName(
          db,
          req.principal!.userId,
          branch.parent_project_ref,
          body.branch_name,
        );
        if (taken) throw new HttpError(409, `Branch ${body.branch_name} already exists`);
      }
      await updateBranch(db, branch.id, {
        name: body.branch_name,
        git_branch: body.git_branch,
        notify_url: body.notify_url,
        persistent: body.persistent,
        request_review: body.request_review,
        status: body.status,
      });
      return branchJson((await branchByIdOrRef(db, req.principal!.userId, branch.id))!);
    },
  );

  routes.delete(
    "/v1/branches/:branch_id_or_ref",
    "Deletes a branch and its database; with force=false it is paused and deleted after an hour unless restored",
    {
      access: WRITE,
      query: z.object({ force: z.enum(["true", "false"]).optional() }),
      status: 200,
      response: z.object({ message: z.literal("ok") }),
    },
    async ({ req, params, query }) => {
      const branch = await addressedBranch(req, params.branch_id_or_ref, WRITE);
      if (query.force === "false") await scheduleBranchDeletion(ctx, branch);
      else await deleteBranchNow(ctx, branch.project_ref);
      return { message: "ok" as const };
    },
  );

  for (const [kind, text] of [
    ["push", "Applies the branch's recorded, unapplied migrations to the branch (up to migration_version)"],
    [
      "merge",
      "Applies the branch's migrations that the parent lacks to the parent (up to migration_version)",
    ],
    ["reset", "Rebuilds the branch from its parent (then its own migrations up to migration_version)"],
  ] as const) {
    routes.post(
      `/v1/branches/:branch_id_or_ref/${kind}`,
      `${text}, as an action run`,
      { access: WRITE, body: migrationBody, status: 201, response: workflowResponse },
      async ({ req, params, body }) => {
        const branch = await addressedBranch(req, params.branch_id_or_ref, WRITE);
        if (branch.project_status !== "ACTIVE_HEALTHY")
          throw new HttpError(400, `Branch ${branch.project_ref} is ${branch.project_status}, not active`);
        await checkMigrationVersion(ctx, branch.project_ref, body.migration_version);
        const runId = await startRun(ctx, branch, kind, { migrationVersion: body.migration_version });
        return { workflow_run_id: runId, message: `${kind} of branch ${branch.name} started` };
      },
    );
  }

  routes.post(
    "/v1/branches/:branch_id_or_ref/restore",
    "Cancels a branch's scheduled deletion and makes it active again",
    { access: WRITE, status: 200, response: z.object({ message: z.string() }) },
    async ({ req, params }) => {
      const branch = await addressedBranch(req, params.branch_id_or_ref, WRITE);
      await restoreBranch(ctx, branch);
      return { message: `Branch ${branch.name} restored` };
    },
  );

  // ------------------------------------------------------------------------------------------- action runs

  const runsRead: Access = { permission: "action_runs_read", scope: "environment:read" };

  routes.get(
    "/v1/projects/:ref/actions",
    "Lists the action runs of the project's branches (or of the branch it is), newest first",
    {
      project: "any",
      access: runsRead,
      query: z.object({
        offset: z.coerce.number().int().min(0).optional(),
        limit: z.coerce.number().int().min(1).max(100).optional(),
      }),
      status: 200,
      response: runShape.array(),
    },
    async ({ project, query }) =>
      (await listRuns(db, project.ref, query.offset ?? 0, query.limit ?? 20)).map(runJson),
  );

  const runOf = async (ref: string, runId: string) =>
    found(await findRun(db, ref, runId), "Action run", runId);

  routes.get(
    "/v1/projects/:ref/actions/:run_id",
    "Gets an action run with its steps' statuses",
    { project: "any", access: runsRead, status: 200, response: runShape },
    async ({ project, params }) => runJson(await runOf(project.ref, params.run_id)),
  );

  routes.get(
    "/v1/projects/:ref/actions/:run_id/logs",
    "Gets an action run's log (text/plain)",
    { project: "any", access: runsRead, status: 200 },
    async ({ project, params, res }) => {
      const run = await runOf(project.ref, params.run_id);
      res.status(200).type("text/plain").send(run.logs);
      return undefined;
    },
  );

  routes.patch(
    "/v1/projects/:ref/actions/:run_id/status",
    "Sets the status of an action run's steps (as a runner reports them)",
    {
      project: "any",
      access: { permission: "action_runs_write", scope: "environment:write" },
      body: z
        .object(Object.fromEntries(STEP_NAMES.map((n) => [n, z.enum(STEP_STATUSES).optional()])))
        .strict(),
      status: 200,
      response: z.object({ message: z.string() }),
    },
    async ({ project, params, body }) => {
      const run = await runOf(project.ref, params.run_id);
      const given = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
      const unknown = Object.keys(given).filter((n) => !run.run_steps.some((s) => s.name === n));
      if (unknown.length) throw new HttpError(400, `Action run ${run.id} has no step ${unknown.join(", ")}`);
      await setStepStatuses(db, run.id, given);
      return { message: "ok" };
    },
  );

  return routes.router;
}
