import { Router } from "express";
import type pg from "pg";
import { z } from "zod";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { HttpError } from "../http";
import { routeTable } from "../route";
import { withAdminTransaction } from "../../db/transaction";
import { withProjectSqlClient } from "./sqlRunner";

/**
 * Migrations: SQL applied in one transaction with its record in the project's own database
 * (`strata_migrations.schema_migrations`), listed, renamed, and rolled back with their stored rollback SQL.
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

/** A version in the CLI's format (UTC yyyymmddhhmmss), later than every recorded one. */
async function nextVersion(client: pg.ClientBase): Promise<string> {
  const now = new Date().toISOString().replace(/\D/g, "").slice(0, 14);
  const { rows } = await client.query("select max(version) as v from strata_migrations.schema_migrations");
  const last: string | null = rows[0].v;
  return last && last >= now ? String(BigInt(last) + 1n) : now;
}

async function inTransaction<T>(
  project: ProjectRuntime,
  work: (client: pg.ClientBase) => Promise<T>,
): Promise<T> {
  // The migration's SQL runs as the project's owner, on a connection of its own.
  return withProjectSqlClient(project, false, (client) => withAdminTransaction(client, work)).catch(
    (e: { message: string; code?: string }) => {
      // A statement of the migration failed: the caller's SQL, answered as a 400.
      if (e.code && !(e instanceof HttpError)) throw new HttpError(400, e.message);
      throw e;
    },
  );
}

export function migrationRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  const base = "/v1/projects/:ref/database/migrations";

  routes.get(base, "Lists applied migrations", { access: Access.read, status: 200 }, async ({ project }) => {
    const { rows } = await project.adminPool.query(
      "select version, name from strata_migrations.schema_migrations order by version",
    );
    return rows;
  });

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
        await client.query(body.query);
        await client.query(
          `insert into strata_migrations.schema_migrations (version, name, statements, rollback, created_by)
           values ($1, $2, array[$3], $4, 'management-api')`,
          [await nextVersion(client), body.name ?? null, body.query, body.rollback ? [body.rollback] : null],
        );
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
        const existing = body.name
          ? await client.query("select version from strata_migrations.schema_migrations where name = $1", [
              body.name,
            ])
          : { rows: [] };
        if (existing.rows.length) {
          await client.query(
            "update strata_migrations.schema_migrations set statements = array[$2], rollback = $3 where version = $1",
            [existing.rows[0].version, body.query, body.rollback ? [body.rollback] : null],
          );
        } else {
          await client.query(
            `insert into strata_migrations.schema_migrations (version, name, statements, rollback, created_by, applied)
             values ($1, $2, array[$3], $4, 'management-api', false)`,
            [
              await nextVersion(client),
              body.name ?? null,
              body.query,
              body.rollback ? [body.rollback] : null,
            ],
          );
        }
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
        const { rows } = await client.query(
          "select version, rollback, applied from strata_migrations.schema_migrations where version >= $1 order by version desc",
          [query.gte],
        );
        for (const row of rows) {
          if (row.applied) for (const statement of row.rollback ?? []) await client.query(statement);
          await client.query("delete from strata_migrations.schema_migrations where version = $1", [
            row.version,
          ]);
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
    async ({ project, params }) => {
      const { rows } = await project.adminPool.query(
        `select version, name, statements, coalesce(rollback, '{}') as rollback, created_by, idempotency_key
           from strata_migrations.schema_migrations where version = $1`,
        [params.version],
      );
      if (!rows.length) throw new HttpError(404, `Migration ${params.version} not found`);
      return Object.fromEntries(Object.entries(rows[0]).filter(([, v]) => v !== null));
    },
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
      const { rowCount } = await project.adminPool.query(
        `update strata_migrations.schema_migrations
            set name = coalesce($2, name), rollback = case when $3::text is null then rollback else array[$3::text] end
          where version = $1`,
        [params.version, body.name ?? null, body.rollback ?? null],
      );
      if (!rowCount) throw new HttpError(404, `Migration ${params.version} not found`);
      return {};
    },
  );

  return routes.router;
}
