import { makePgService } from "@dataplan/pg/adaptors/pg";
import { execute, hookArgs, isSafeError } from "grafast";
import { GraphQLError, Kind, type GraphQLSchema } from "grafast/graphql";
import { makeSchema } from "graphile-build";
import type { RequestAuth } from "../auth/dataAuth";
import type { AppContext } from "../context";
import type { ProjectRuntime } from "../projects/runtime";
import basePreset from "../../graphile.config";
import { prepareDocument, RequestError } from "./document";

interface RoleSchema {
  schema: GraphQLSchema;
  resolvedPreset: GraphileConfig.ResolvedPreset;
}

export interface GraphqlRequestBody {
  query?: unknown;
  variables?: unknown;
  operationName?: unknown;
}

type GraphqlResponse = Record<string, unknown>;

/** The SQL schemas the API exposes: `public`, or the project's `db_schema` setting (comma-separated). */
async function exposedSchemas(ctx: AppContext, project: ProjectRuntime): Promise<string[]> {
  const { rows } = await ctx.platformPool.query<{ db_schema: string | null }>(
    "select db_schema from platform.restapi_config where project_ref = $1",
    [project.ref],
  );
  const configured = rows[0]?.db_schema
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return configured?.length ? configured : ["public"];
}

/**
 * The schema a role sees in a project, built from that role's privileges on first use and kept in the
 * project's schema caches until the schema changes.
 */
function schemaFor(ctx: AppContext, project: ProjectRuntime, role: string): Promise<RoleSchema> {
  const key = `graphql:${role}`;
  let cached = project.caches.get(key) as Promise<RoleSchema> | undefined;
  if (!cached) {
    cached = exposedSchemas(ctx, project)
      .then((schemas) =>
        makeSchema({
          extends: [basePreset],
          pgServices: [
            makePgService({
              pool: project.dataPool,
              schemas,
              pgSettingsForIntrospection: { role },
            }),
          ],
        }),
      )
      .then(({ schema, resolvedPreset }) => ({ schema, resolvedPreset }));
    project.caches.set(key, cached);
    cached.catch(() => project.caches.get(key) === cached && project.caches.delete(key));
  }
  return cached;
}

/** A database error (from `pg`): its message is part of what pg_graphql returns. */
function isDatabaseError(error: unknown): boolean {
  return (
    error instanceof Error &&
    typeof (error as { code?: unknown }).code === "string" &&
    typeof (error as { severity?: unknown }).severity === "string"
  );
}

/** pg_graphql's error shape: only `message`; internal errors are logged, not described to the client. */
function maskError(ctx: AppContext, error: GraphQLError): { message: string } {
  const original = error.originalError;
  if (!original || isSafeError(original) || isDatabaseError(original)) {
    return { message: error.message };
  }
  // A role without any mutation (no insert/update/delete privilege) has no Mutation type.
  if (/No mutation type found in schema/.test(original.message)) {
    return { message: "Schema is not configured for mutations" };
  }
  ctx.log.warn({ err: original }, "graphql request failed");
  return { message: "Internal server error" };
}

function errorsOnly(ctx: AppContext, errors: readonly GraphQLError[]): GraphqlResponse {
  const masked = errors.map((e) => maskError(ctx, e));
  return errors.some((e) => e instanceof RequestError) ? { errors: masked } : { data: null, errors: masked };
}

/** Executes one GraphQL request for `auth` against `project`; the result is always a JSON document. */
export async function executeGraphql(
  ctx: AppContext,
  project: ProjectRuntime,
  auth: RequestAuth,
  body: GraphqlRequestBody,
): Promise<GraphqlResponse> {
  if (typeof body.query !== "string") return { data: null, errors: [{ message: "No query" }] };
  const variables = body.variables ?? undefined;
  if (variables !== undefined && (typeof variables !== "object" || Array.isArray(variables))) {
    return { errors: [{ message: "variables must be an object" }] };
  }
  const operationName = typeof body.operationName === "string" ? body.operationName : undefined;
  const { schema, resolvedPreset } = await schemaFor(ctx, project, auth.role);
  const prepared = prepareDocument(schema, body.query, operationName);
  if (Array.isArray(prepared)) {
    const parsedErrors = prepared as readonly GraphQLError[];
    return errorsOnly(ctx, parsedErrors);
  }
  const { document, errors: gateErrors } = prepared as Exclude<typeof prepared, readonly GraphQLError[]>;
  const emptyOperation = document.definitions.some(
    (d) => d.kind === Kind.OPERATION_DEFINITION && d.selectionSet.selections.length === 0,
  );
  if (emptyOperation) return errorsOnly(ctx, gateErrors);
  const args = await hookArgs({
    schema,
    document,
    variableValues: variables as Record<string, unknown> | undefined,
    operationName,
    resolvedPreset,
    requestContext: { strata: { auth } },
  });
  const result = await execute(args);
  if (Symbol.asyncIterator in (result as object)) {
    return { data: null, errors: [{ message: "Subscriptions are not supported" }] };
  }
  const { data, errors } = result as { data?: unknown; errors?: readonly GraphQLError[] };
  // pg_graphql answers a failed request as a whole: no partial data next to an error.
  if (errors?.length) return errorsOnly(ctx, errors);
  const out: GraphqlResponse = { data: data ?? null };
  if (gateErrors.length) out.errors = gateErrors.map((e) => maskError(ctx, e));
  return out;
}
