import { Router } from "express";
import type pg from "pg";
import { z } from "zod";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { found, HttpError } from "../http";
import { routeTable } from "../route";
import { withAdminTransaction } from "../../db/transaction";
import { ensureHistory } from "../../projects/migrationHistory";
import { withBuiltInExtensions } from "../../modules/extensions";
import { withProjectSqlClient } from "./sqlRunner";
import {
  deleteMigration,
  getMigration,
  listMigrations,
  migrationsFrom,
  recordMigration,
  replaceNamedMigration,
  updateMigration,
  withHistory,
} from "./store";

/**
 * Migrations: SQL applied in one transaction with its record in the project's own database, in the history the
 * CLI shares (`supabase_migrations.schema_migrations`): listed, renamed, and rolled back with their stored
 * rollback SQL.
 */

const MigrationBody = z.object({
  query: z.string().min(1, "must not be empty"),
  name: z.string().max(255).optional(),
  rollback: z.string().optional(),
});

const Access = {
  read: { permission: "database_migrations_read", scope: "database:read" },
  write: { permission: "database_migrations_write", scope: "database:write" },
};

async function inTransaction<T>(
  project: ProjectRuntime,
  work: (client: pg.ClientBase) => Promise<T>,
): Promise<T> {
  // The migration's SQL runs as the project's owner, on a connection of its own.
  return withProjectSqlClient(project, false, (client) =>
    withAdminTransaction(client, async () => {
      await ensureHistory(client);
      return work(client);
    }),
  ).catch((e: { message: string; code?: string }) => {
    // A statement of the migration failed: the caller's SQL, answered as a 400.
    if (e.code && !(e instanceof HttpError)) throw new HttpError(400, e.message);
    throw e;
  });
}

const recorded = (body: z.infer<typeof MigrationBody>) => ({
  name: body.name ?? null,
  query: body.query,
  rollback: body.rollback ?? null,
});

export function migrationRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  const base = "/v1/projects/:ref/database/migrations";

  routes.get(base, "Lists applied migrations", { access: Access.read, status: 200 }, async ({ project }) =>
    withHistory(project, listMigrations),
  );

  routes.post(
    base,
    "Applies a migration and records it",
    {
      rateLimits: [{ name: "migrations", points: 120, seconds: 180 }],
      access: Access.write,
      body: MigrationBody,
      status: 200,
    },
    async ({ project, body }) => {
      await inTransaction(project, async (client) => {
        await client.query(await withBuiltInExtensions(client, body.query));
        await recordMigration(client, recorded(body));
      });
      project.invalidateSchema("migration applied");
      return {};
    },
  );

  routes.put(
    base,
    "Records a migration without applying it",
    { access: Access.write, body: MigrationBody, status: 200 },
    async ({ project, body }) => {
      await inTransaction(project, async (client) => {
        if (!(await replaceNamedMigration(client, recorded(body))))
          await recordMigration(client, recorded(body), false);
      });
      return {};
    },
  );

  routes.delete(
    base,
    "Rolls back migrations from version `gte` on, newest first, with their rollback SQL",
    {
      access: Access.write,
      query: z.object({ gte: z.string().regex(/^\d+$/, "must be a migration version") }),
      status: 200,
    },
    async ({ project, query }) => {
      await inTransaction(project, async (client) => {
        for (const row of await migrationsFrom(client, query.gte)) {
          if (row.applied) for (const statement of row.rollback ?? []) await client.query(statement);
          await deleteMigration(client, row.version);
        }
      });
      project.invalidateSchema("migrations rolled back");
      return {};
    },
  );

  routes.get(
    `${base}/:version`,
    "Gets one migration with its statements",
    { access: Access.read, status: 200 },
    async ({ project, params }) =>
      found(
        await withHistory(project, (client) => getMigration(client, params.version)),
        "Migration",
        params.version,
      ),
  );

  routes.patch(
    `${base}/:version`,
    "Renames a migration or replaces its rollback SQL",
    {
      access: Access.write,
      body: z.object({ name: z.string().max(255).optional(), rollback: z.string().optional() }).strict(),
      status: 200,
    },
    async ({ project, params, body }) => {
      if (!(await withHistory(project, (client) => updateMigration(client, params.version, body))))
        throw new HttpError(404, `Migration ${params.version} not found`);
      return {};
    },
  );

  return routes.router;
}
