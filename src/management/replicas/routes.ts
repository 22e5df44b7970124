import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { HttpError } from "../http";
import { clusterRegions } from "../projects/store";
import { routeTable } from "../route";

const Replica = z.object({
  identifier: z.string().describe("the database_identifier that read-replicas/remove takes"),
  database_type: z.literal("READ_REPLICA"),
  status: z.enum(["COMING_UP", "ACTIVE_HEALTHY", "UNHEALTHY", "INIT_FAILED", "GOING_DOWN"]),
  region: z.string(),
  db_host: z.string(),
  db_port: z.number().int(),
  lag_bytes: z
    .number()
    .int()
    .nullable()
    .describe("WAL bytes the replica has yet to replay, as the primary sees it (null: not streaming)"),
  lag_seconds: z.number().nullable().describe("the primary's replay_lag for it, in seconds"),
  error: z.string().nullable(),
  inserted_at: z.string(),
});

/**
 * Read replicas (beta): streaming physical standbys of the embedded cluster (projects/replicas.ts). A
 * standby holds the whole cluster, so only installation administrators set one up or remove it; the project
 * it was set up for sends its REST reads (GET and HEAD of /rest/v1) to its ACTIVE_HEALTHY replicas in turn.
 */
export function replicaRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const write = { permission: "infra_read_replicas_write" } as const;
  // A standby copies the whole cluster and holds a slot of it: the installation's, not one project's.
  const clusterWide = { ...write, installationAdmin: true } as const;
  const manager = (project: ProjectRuntime) => {
    if (!ctx.replicas?.serves(project.record.clusterId))
      throw new HttpError(
        400,
        "Read replicas need the embedded cluster Strata runs itself; this project's database is on a cluster Strata does not run (DATABASE_URL)",
      );
    return ctx.replicas;
  };

  routes.post(
    "/v1/projects/:ref/read-replicas/setup",
    "Sets up a read replica: a streaming physical standby of the project's (embedded) cluster on this " +
      "machine, from a base backup, with a replication slot of its own. It comes up in the background " +
      "(COMING_UP, then ACTIVE_HEALTHY in GET .../read-replicas); it replicates every project of the " +
      "cluster, and this project's REST GET and HEAD requests then go to it. Installation administrators " +
      "only (403 for others)",
    {
      feature: { name: "read_replicas" },
      access: clusterWide,
      project: "database",
      body: z
        .object({
          read_replica_region: z
            .string()
            .regex(/^[a-z0-9-]{1,40}$/, "must be a region name (lowercase letters, digits and dashes)"),
        })
        .strict(),
      status: 204,
    },
    async ({ project, body }) => {
      const replicas = manager(project);
      const regions = await clusterRegions(ctx.platformPool);
      if (!regions.includes(body.read_replica_region))
        throw new HttpError(
          400,
          `Replicas run beside their primary: read_replica_region must be one of ${regions.join(", ")}`,
        );
      await replicas.setup(project.ref, body.read_replica_region);
      return undefined;
    },
  );

  routes.post(
    "/v1/projects/:ref/read-replicas/remove",
    "Removes a read replica: its reads go back to the primary, the standby stops, its replication slot " +
      "and role are dropped and its files deleted. Installation administrators only (403 for others)",
    { access: clusterWide, body: z.object({ database_identifier: z.string().min(1) }).strict(), status: 204 },
    async ({ project, body }) => {
      const replicas = manager(project);
      if (await replicas.comingUp(project.ref, body.database_identifier))
        throw new HttpError(
          409,
          `Read replica ${body.database_identifier} is still coming up; remove it once it is up`,
        );
      const removed = await replicas.remove(project.ref, body.database_identifier);
      if (!removed)
        throw new HttpError(404, `Project ${project.ref} has no read replica ${body.database_identifier}`);
      return undefined;
    },
  );

  routes.get(
    "/v1/projects/:ref/read-replicas",
    "Lists the project's read replicas with their status and replication lag (Strata's own endpoint: the " +
      "spec has no place for lag)",
    { access: write, status: 200, response: z.array(Replica) },
    async ({ project }) => {
      if (!ctx.replicas?.serves(project.record.clusterId)) return [];
      const host = new URL(ctx.adminUrl).hostname;
      return (await ctx.replicas.list(project.ref)).map((r) => ({
        identifier: r.identifier,
        database_type: "READ_REPLICA" as const,
        status: r.status as "ACTIVE_HEALTHY",
        region: r.region,
        db_host: host,
        db_port: r.port,
        lag_bytes: r.lag_bytes,
        lag_seconds: r.lag_seconds,
        error: r.error,
        inserted_at: r.inserted_at.toISOString(),
      }));
    },
  );
  return routes.router;
}
