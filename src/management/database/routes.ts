import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { randomSecret } from "../../platform/ids";
import { dataApiConfigOf } from "../../catalog/dataApiConfig";
import { buildRestOpenApi } from "../../catalog/openapi";
import { roleGrants } from "../http";
import { routeTable } from "../route";
import { runSql } from "./sqlRunner";
import { loginRolesWithPrefix } from "./store";
import { withAdminTransaction } from "../../db/transaction";
import { runUtilityStatement } from "../../db/utility";

/** SQL, the REST layer's OpenAPI document, the owner's password and temporary login roles. */

const QueryBody = z.object({
  query: z.string().min(1, "must not be empty"),
  parameters: z.array(z.unknown()).optional(),
  read_only: z.boolean().optional(),
});

/** The project's read-only role (sql/project/010_project_roles.sql). */
const readRole = (project: ProjectRuntime) => `strata_read_${project.ref}`;
const loginRolePrefix = (project: ProjectRuntime) => `cli_login_${project.ref}_`;

/** A utility statement: a `format()` template (`%I` identifiers, `%L` literals) and its values. */
type Utility = [template: string, ...values: string[]];

/** Runs utility statements on the project's database as superuser, in one transaction. */
async function adminExec(project: ProjectRuntime, statements: Utility[]) {
  await withAdminTransaction(project.adminPool, async (client) => {
    for (const [template, ...values] of statements) await runUtilityStatement(client, template, values);
  });
}

export function databaseRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });

  routes.post(
    "/v1/projects/:ref/database/query",
    "Runs SQL as the project's owner (read-only with `read_only` or a read-only token)",
    {
      access: { permission: { or: ["database_write", "database_read"] }, scope: "database:write" },
      body: QueryBody,
      status: 201,
    },
    async ({ project, req, body }) => {
      // Writing takes database_write from the token and from the member's organization role; OAuth tokens
      // need the database:write scope to get here at all.
      const granted = req.principal?.permissions;
      const role = req.membership?.role;
      const mayWrite =
        (!granted || granted.includes("database_write")) && (!role || roleGrants(role, "database_write"));
      return runSql(project, {
        query: body.query,
        parameters: body.parameters,
        readOnly: body.read_only === true || !mayWrite,
      });
    },
  );

  routes.post(
    "/v1/projects/:ref/database/query/read-only",
    "Runs SQL in a read-only transaction as a read-only role",
    {
      access: { permission: "database_read", scope: "database:read" },
      body: QueryBody.omit({ read_only: true }),
      status: 201,
    },
    async ({ project, body }) => {
      return runSql(project, { query: body.query, parameters: body.parameters, readOnly: true });
    },
  );

  routes.get(
    "/v1/projects/:ref/database/openapi",
    "The REST layer's OpenAPI document for one schema",
    {
      access: { permission: "database_read", scope: "database:read" },
      query: z.object({
        schema: z
          .string()
          .regex(/^[A-Za-z_][A-Za-z0-9_$]*$/, "must be a schema name")
          .optional(),
      }),
      status: 200,
    },
    async ({ project, query }) => {
      const schema = query.schema ?? (await dataApiConfigOf(ctx, project)).schemas[0];
      return buildRestOpenApi(project, schema);
    },
  );

  routes.patch(
    "/v1/projects/:ref/database/password",
    "Sets the password of the project's owner login role",
    {
      access: { permission: "database_config_write", scope: "database:write" },
      body: z.object({ password: z.string().min(8, "must be at least 8 characters").max(1024) }),
      status: 200,
    },
    async ({ project, body }) => {
      // The owner role exists since the project was opened (its privileges are set there); this lets it log in.
      const role = project.record.ownerRole;
      await adminExec(project, [["alter role %I with login password %L", role, body.password]]);
      return { message: `Password of ${role} updated` };
    },
  );

  routes.post(
    "/v1/projects/:ref/cli/login-role",
    "Creates a temporary login role (read-only or not) that expires after its TTL",
    {
      access: { permission: "database_write", scope: "database:write" },
      body: z.object({ read_only: z.boolean(), ttl_seconds: z.number().int().min(1).max(86_400).optional() }),
      status: 201,
    },
    async ({ project, body }) => {
      const role =
        loginRolePrefix(project) +
        randomSecret(6)
          .toLowerCase()
          .replace(/[^a-z0-9]/g, "x");
      const password = randomSecret(24);
      const ttl = body.ttl_seconds ?? 3600;
      const until = new Date(Date.now() + ttl * 1000).toISOString();
      await adminExec(project, [
        ["create role %I login password %L valid until %L", role, password, until],
        // The project's read-only or owner role, and with it CONNECT on this project's database only.
        ["grant %I to %I", body.read_only ? readRole(project) : project.record.ownerRole, role],
        ...(body.read_only
          ? [["alter role %I set default_transaction_read_only = on", role] as Utility]
          : []),
      ]);
      return { role, password, ttl_seconds: ttl };
    },
  );

  routes.delete(
    "/v1/projects/:ref/cli/login-role",
    "Drops the project's temporary login roles",
    { access: { permission: "database_write", scope: "database:write" }, status: 200 },
    async ({ project }) => {
      const roles = await loginRolesWithPrefix(project.adminPool, loginRolePrefix(project));
      await adminExec(
        project,
        roles.flatMap((role): Utility[] => [
          ["drop owned by %I", role],
          ["drop role %I", role],
        ]),
      );
      return { message: `Dropped ${roles.length} login role(s)` };
    },
  );

  return routes.router;
}
