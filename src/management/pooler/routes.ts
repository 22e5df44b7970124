import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { DEFAULT_POOL_SIZE, POOL_IDLE_MS, type ProjectRuntime } from "../../projects/runtime";
import { touchProject } from "../projects/store";
import { routeTable } from "../route";
import { readSettings, writeSettings } from "../../projects/settings";

/**
 * The pooler settings size Strata's own pool of each project (the connections its data requests run on):
 * `default_pool_size` is that pool's size on every node, applied by rebuilding the project's runtime. The
 * connection string answered is the database listener's (src/pooler: user `postgres.<ref>`, database `postgres`,
 * as the platform's pooler names them; the CLI's `supabase link` keeps it for `db push` and the like), or, while
 * the listener is off, the database itself as the project's owner role. Either works with psql once
 * `[YOUR-PASSWORD]` is replaced by `db_pass`; the listener relays each client connection, it pools nothing.
 */

const POOLER = { default_pool_size: DEFAULT_POOL_SIZE };
/** Strata's pool runs each data request as one transaction on a pooled connection. */
const POOL_MODE = "transaction";

interface Connection {
  user: string;
  host: string;
  port: number;
  name: string;
  string: string;
}

function connectionOf(user: string, host: string, port: number, name: string): Connection {
  const hostPart = host.includes(":") ? `[${host}]` : host;
  const string = `postgresql://${user}:[YOUR-PASSWORD]@${hostPart}:${port}/${encodeURIComponent(name)}`;
  return { user, host, port, name, string };
}

/** The database itself, as the project's owner role, at `port` (the primary's, or a read replica's). */
function direct(project: ProjectRuntime, port?: number): Connection {
  const url = new URL(project.record.adminUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  return connectionOf(project.record.ownerRole, url.hostname, port ?? Number(url.port || 5432), name);
}

/** How clients connect to the primary: through the database listener when it runs. */
function connection(ctx: AppContext, project: ProjectRuntime): Connection {
  return ctx.dbListener
    ? connectionOf(`postgres.${project.ref}`, ctx.dbListener.host, ctx.dbListener.port, "postgres")
    : direct(project);
}

/**
 * Clients connect to the database directly: the most client connections is the cluster's max_connections
 * (read from the project's database, or from the control plane's cluster while the project is paused).
 */
async function maxClientConnections(ctx: AppContext, project: ProjectRuntime): Promise<number> {
  const sql = "select current_setting('max_connections')::int as n";
  const { rows } = await project.adminPool.query(sql).catch(() => ctx.platformPool.query(sql));
  return rows[0].n;
}

export const POOL_SETTINGS_READ = { permission: "database_read", scope: "database:read" };

/** The pool's settings as GET .../config/database/pgbouncer answers them. */
export async function poolSettings(ctx: AppContext, project: ProjectRuntime) {
  const pooler = await readSettings(ctx, project.ref, "pooler", POOLER);
  return {
    default_pool_size: pooler.default_pool_size,
    max_client_conn: await maxClientConnections(ctx, project),
    // The pool's idle timeout and how long a request waits for a connection (runtime.ts), in seconds.
    server_idle_timeout: POOL_IDLE_MS / 1000,
    query_wait_timeout: Math.ceil(ctx.config.poolWaitMs / 1000),
    reserve_pool_size: 0,
    connection_string: connection(ctx, project).string,
    pool_mode: POOL_MODE,
  };
}

export function poolerRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const base = "/v1/projects/:ref/config/database";

  routes.get(
    `${base}/pooler`,
    "Lists the project's pool (Strata's own, sized by default_pool_size) and how to connect, to the " +
      "primary and to each ACTIVE_HEALTHY read replica (read-only connections)",
    {
      access: { permission: "database_pooling_config_read", scope: "database:read" },
      response: z.array(
        z.object({
          identifier: z.string(),
          database_type: z.enum(["PRIMARY", "READ_REPLICA"]),
          is_using_scram_auth: z.boolean(),
          db_user: z.string(),
          db_host: z.string(),
          db_port: z.number().int(),
          db_name: z.string(),
          connection_string: z.string(),
          connectionString: z.string(),
          default_pool_size: z.number().int(),
          max_client_conn: z.number().int(),
          pool_mode: z.literal(POOL_MODE),
        }),
      ),
      status: 200,
    },
    async ({ project }) => {
      const pooler = await readSettings(ctx, project.ref, "pooler", POOLER);
      const c = connection(ctx, project);
      const maxClientConn = await maxClientConnections(ctx, project);
      const replicas = ctx.replicas?.serves(project.record.clusterId)
        ? (await ctx.replicas.list(project.ref)).filter((r) => r.status === "ACTIVE_HEALTHY")
        : [];
      return [
        {
          identifier: project.ref,
          database_type: "PRIMARY" as const,
          is_using_scram_auth: true,
          db_user: c.user,
          db_host: c.host,
          db_port: c.port,
          db_name: c.name,
          connection_string: c.string,
          connectionString: c.string,
          default_pool_size: pooler.default_pool_size,
          max_client_conn: maxClientConn,
          pool_mode: POOL_MODE,
        },
        ...replicas.map((r) => {
          // Replicas are reached directly (the listener routes to primaries only).
          const replica = direct(project, r.port);
          return {
            identifier: r.identifier,
            database_type: "READ_REPLICA" as const,
            is_using_scram_auth: true,
            db_user: replica.user,
            db_host: replica.host,
            db_port: replica.port,
            db_name: replica.name,
            connection_string: replica.string,
            connectionString: replica.string,
            default_pool_size: pooler.default_pool_size,
            max_client_conn: maxClientConn,
            pool_mode: POOL_MODE,
          };
        }),
      ];
    },
  );
  routes.patch(
    `${base}/pooler`,
    "Sets the size of the project's pool (applied on every node at once)",
    {
      access: { permission: "database_pooling_config_write", scope: "database:write" },
      body: z
        .object({
          default_pool_size: z.number().int().min(1).max(200).optional(),
          pool_mode: z
            .literal(POOL_MODE, { error: "Strata's pool runs in transaction mode only" })
            .optional(),
        })
        .strict(),
      response: z.object({ default_pool_size: z.number().int(), pool_mode: z.literal(POOL_MODE) }),
      status: 200,
    },
    async ({ project, body }) => {
      const pooler = await writeSettings(ctx, project.ref, "pooler", POOLER, {
        ...(body.default_pool_size !== undefined ? { default_pool_size: body.default_pool_size } : {}),
      });
      // Every node drops the project's runtime; the next request opens a pool of the new size.
      await touchProject(ctx.platformPool, project.ref);
      return { default_pool_size: pooler.default_pool_size, pool_mode: POOL_MODE };
    },
  );
  for (const spelling of ["poolb", "pgbouncer"]) {
    routes.get(
      `${base}/${spelling}`,
      "Gets the pool's settings as Strata applies them",
      {
        access: POOL_SETTINGS_READ,
        response: z.object({
          default_pool_size: z.number().int(),
          max_client_conn: z.number().int(),
          server_idle_timeout: z.number().int(),
          query_wait_timeout: z.number().int(),
          reserve_pool_size: z.number().int(),
          connection_string: z.string(),
          pool_mode: z.literal(POOL_MODE),
        }),
        status: 200,
      },
      async ({ project }) => poolSettings(ctx, project),
    );
  }
  return routes.router;
}
