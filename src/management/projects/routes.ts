import type { Router } from "express";
import type { z } from "zod";
import type { AppContext } from "../../context";
import { clusterVersion } from "../../projects/clusters";
import { DEFAULT_CLUSTER_ID } from "../../platform/firstStart";
import { newProjectRef, randomSecret } from "../../platform/ids";
import { checkRole, HttpError } from "../http";
import { organizationOf } from "../membership";
import { routeTable, type RouteInput } from "../route";
import { COMPUTE_SIZES, computeOfInstanceSize, computeSize } from "../billing/compute";
import { planHas } from "../billing/plans";
import { writeSettings } from "../../projects/settings";
import { projectHealth } from "./health";
import {
  cancelRestore,
  deleteProject,
  pauseProject,
  provisionProject,
  restartProject,
  restoreProject,
} from "./lifecycle";
import {
  availableRegionsQuery,
  availableRegionsResponse,
  createProjectBody,
  emptyObject,
  healthItem,
  healthQuery,
  organizationProjectsQuery,
  organizationProjectsResponse,
  projectDetail,
  projectRefResponse,
  projectSummary,
  renameProjectBody,
  restoreVersionsResponse,
} from "./shapes";
import {
  clusterFor,
  clusterRegions,
  findProject,
  insertProject,
  listOrganizationProjects,
  listProjects,
  renameProject,
  type ProjectRow,
} from "./store";

const CLOUD_PROVIDER = "STRATA";
/** The access rules of the operations on one project (read it, change it or its lifecycle). */
export const ADMIN_READ = { permission: "project_admin_read", scope: "projects:read" } as const;
const ADMIN_WRITE = { permission: "project_admin_write", scope: "projects:write" } as const;

function summary(p: ProjectRow) {
  return {
    id: p.ref,
    ref: p.ref,
    organization_id: p.organization_slug,
    organization_slug: p.organization_slug,
    name: p.name,
    region: p.cluster.region,
    created_at: p.created_at.toISOString(),
    status: p.status as never,
  };
}

async function detail(p: ProjectRow) {
  const version = await clusterVersion(p.cluster);
  return {
    ...summary(p),
    database: {
      host: new URL(p.cluster.adminUrl).hostname,
      version,
      sql_engine: "postgres",
      postgres_engine: "postgres",
      release_channel: "ga",
    },
  };
}

/** Projects: lifecycle, listings, health. */
/**
 * The compute add-on of a new project's `desired_instance_size` (none for the smallest sizes); 400 for a size
 * Strata does not offer, 402 for one the organization's plan may not select.
 */
function computeOf(size: string | undefined, org: { slug: string; plan: string }): string | null {
  if (size === undefined) return null;
  const compute = computeOfInstanceSize(size);
  if (compute === undefined)
    throw new HttpError(
      400,
      `Invalid body: desired_instance_size: one of pico, nano, ${COMPUTE_SIZES.map((s) => s.id.slice(3)).join(", ")}`,
    );
  if (compute && compute !== "ci_micro" && !planHas(org.plan, "addons.compute"))
    throw new HttpError(
      402,
      `Payment required: the ${size} compute size needs the pro plan or above; organization ${org.slug} is on the ${org.plan} plan`,
    );
  return compute;
}

export function projectRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const db = ctx.platformPool;

  /** The project `ref` in one of the caller's organizations, else 404. */
  async function memberProjectRow(userId: string, ref: string): Promise<ProjectRow> {
    const project = /^[a-z]{20}$/.test(ref) ? await findProject(db, userId, ref) : undefined;
    if (!project) throw new HttpError(404, `Project ${ref} not found`);
    return project;
  }

  /** The handler of an operation on the project `:ref`: `run` gets its row (see memberProjectRow). */
  const onProject =
    <B extends z.ZodType = z.ZodUnknown, Q extends z.ZodType = z.ZodUnknown>(
      run: (project: ProjectRow, input: RouteInput<B, Q, undefined>) => Promise<unknown>,
    ) =>
    async (input: RouteInput<B, Q, undefined>) =>
      run(await memberProjectRow(input.req.principal!.userId, input.params.ref), input);

  routes.get(
    "/v1/projects",
    "Lists the projects of the caller's organizations",
    {
      access: { permission: "projects_read", scope: "projects:read" },
      status: 200,
      response: projectDetail.array(),
    },
    async ({ req }) =>
      Promise.all((await listProjects(db, req.principal!.userId, req.principal!.organizationId)).map(detail)),
  );

  routes.post(
    "/v1/projects",
    "Creates a project: a new database on a cluster, bootstrapped, with its own JWT secret and keys",
    {
      access: { permission: "organization_projects_create", scope: "projects:write" },
      body: createProjectBody,
      status: 201,
      response: projectSummary,
    },
    async ({ req, body }) => {
      const userId = req.principal!.userId;
      const org = await organizationOf(ctx, req.principal!, body.organization_slug);
      checkRole(org.role_name, "organization_projects_create");
      const compute = computeOf(body.desired_instance_size, org);
      const cluster = await clusterFor(db, body.region_selection?.code ?? body.region, DEFAULT_CLUSTER_ID);
      const ref = newProjectRef();
      await insertProject(db, {
        ref,
        name: body.name,
        organizationId: org.id,
        clusterId: cluster.id,
        databaseName: `project_${ref}`,
        jwtSecret: randomSecret(32),
      });
      const project = (await findProject(db, userId, ref))!;
      if (compute) {
        // The size's add-on and pool size, stored before the database exists; provisioning sets its connection limit.
        const size = computeSize(compute)!;
        await writeSettings(
          ctx,
          ref,
          "addons",
          {},
          {
            selected: [{ type: "compute_instance", variant: { id: size.id } }],
            previous_compute: null,
          },
        );
        await writeSettings(ctx, ref, "pooler", {}, { default_pool_size: size.pool });
      }
      // Clients poll GET /v1/projects/{ref} until ACTIVE_HEALTHY.
      void provisionProject(ctx, project, false, body.db_pass);
      return summary(project);
    },
  );

  routes.get(
    "/v1/projects/available-regions",
    "Lists the regions of the clusters Strata can place projects on",
    {
      access: { scope: "organizations:read" },
      query: availableRegionsQuery,
      status: 200,
      response: availableRegionsResponse,
    },
    async ({ req, query }) => {
      await organizationOf(ctx, req.principal!, query.organization_slug);
      const specific = (await clusterRegions(db)).map((code) => ({
        name: code,
        code,
        type: "specific",
        provider: CLOUD_PROVIDER,
        status: "available",
      }));
      const smartGroup = { name: "Any", code: "any", type: "smartGroup" };
      return { recommendations: { smartGroup, specific }, all: { smartGroup: [smartGroup], specific } };
    },
  );

  routes.get(
    "/v1/organizations/:slug/projects",
    "Lists an organization's projects with offset pagination, name search, sort and status filter",
    {
      organization: true,
      access: { permission: "organization_projects_read", scope: "projects:read" },
      query: organizationProjectsQuery,
      status: 200,
      response: organizationProjectsResponse,
    },
    async ({ organization: org, query }) => {
      const { rows, count } = await listOrganizationProjects(db, org.id, query);
      return {
        projects: rows.map((p) => ({
          ref: p.ref,
          name: p.name,
          cloud_provider: CLOUD_PROVIDER,
          region: p.cluster.region,
          is_branch: p.is_branch,
          status: p.status as never,
          inserted_at: p.created_at.toISOString(),
          databases: [
            {
              region: p.cluster.region,
              status: p.status as never,
              cloud_provider: CLOUD_PROVIDER,
              identifier: p.ref,
              type: "PRIMARY" as const,
            },
          ],
        })),
        pagination: { count, limit: query.limit, offset: query.offset },
      };
    },
  );

  routes.get(
    "/v1/projects/:ref",
    "Gets a project",
    {
      access: ADMIN_READ,
      status: 200,
      response: projectDetail,
    },
    onProject(detail),
  );

  routes.patch(
    "/v1/projects/:ref",
    "Renames a project",
    {
      access: ADMIN_WRITE,
      body: renameProjectBody,
      status: 200,
      response: projectRefResponse,
    },
    onProject(async (project, { body }) => {
      await renameProject(db, project.ref, body.name);
      return { id: project.id, ref: project.ref, name: body.name };
    }),
  );

  routes.delete(
    "/v1/projects/:ref",
    "Deletes a project and drops its database",
    {
      access: ADMIN_WRITE,
      status: 200,
      response: projectRefResponse,
    },
    onProject(async (project) => {
      await deleteProject(ctx, project);
      return { id: project.id, ref: project.ref, name: project.name };
    }),
  );

  routes.get(
    "/v1/projects/:ref/health",
    "Checks the project's services (db, GraphQL, REST, auth) for real",
    {
      access: ADMIN_READ,
      query: healthQuery,
      status: 200,
      response: healthItem.array(),
    },
    onProject(async (project, { params, query }) => {
      const runtime = await ctx.registry.get(project.ref);
      if (!runtime) throw new HttpError(404, `Project ${params.ref} not found`);
      return projectHealth(ctx, runtime, query.services, query.timeout_ms);
    }),
  );

  const lifecycle = (
    path: string,
    summaryText: string,
    action: (ctx: AppContext, project: ProjectRow) => Promise<void>,
  ) =>
    routes.post(
      path,
      summaryText,
      {
        access: ADMIN_WRITE,
        status: 200,
        response: emptyObject,
      },
      onProject(async (project) => {
        await action(ctx, project);
        return {};
      }),
    );

  lifecycle(
    "/v1/projects/:ref/pause",
    "Pauses a project: INACTIVE, its database refuses connections",
    pauseProject,
  );
  lifecycle(
    "/v1/projects/:ref/restore",
    "Restores a paused project to ACTIVE_HEALTHY, data intact",
    restoreProject,
  );
  lifecycle(
    "/v1/projects/:ref/restore/cancel",
    "Cancels an unfinished restore: back to INACTIVE",
    cancelRestore,
  );
  lifecycle(
    "/v1/projects/:ref/restart",
    "Restarts a project: every Strata process rebuilds its APIs (schema caches, pools)",
    restartProject,
  );

  routes.get(
    "/v1/projects/:ref/restore",
    "Lists the versions a paused project can be restored to",
    {
      access: ADMIN_READ,
      status: 200,
      response: restoreVersionsResponse,
    },
    onProject(async (project) => {
      const version = await clusterVersion(project.cluster);
      return {
        available_versions: [
          { version, release_channel: "ga", sql_engine: "postgres", postgres_engine: "postgres" },
        ],
      };
    }),
  );

  return routes.router;
}
