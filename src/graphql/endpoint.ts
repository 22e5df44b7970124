import { makePgService } from "@dataplan/pg/adaptors/pg";
import { grafast } from "grafast";
import type { GraphQLSchema } from "grafast/graphql";
import { makeSchema } from "graphile-build";
import type { RequestAuth } from "../auth/dataAuth";
import type { ProjectRuntime } from "../projects/runtime";
import basePreset from "../../graphile.config";

interface RoleSchema {
  schema: GraphQLSchema;
  resolvedPreset: GraphileConfig.ResolvedPreset;
}

export interface GraphqlRequestBody {
  query?: unknown;
  variables?: unknown;
  operationName?: unknown;
}

/**
 * The schema a role sees in a project, built from that role's privileges on first use and kept in the
 * project's schema caches until the schema changes.
 */
function schemaFor(project: ProjectRuntime, role: string): Promise<RoleSchema> {
  const key = `graphql:${role}`;
  let cached = project.caches.get(key) as Promise<RoleSchema> | undefined;
  if (!cached) {
    cached = makeSchema({
      extends: [basePreset],
      pgServices: [
        makePgService({
          pool: project.dataPool,
          schemas: ["public"],
          pgSettingsForIntrospection: { role },
        }),
      ],
    }).then(({ schema, resolvedPreset }) => ({ schema, resolvedPreset }));
    project.caches.set(key, cached);
    cached.catch(() => project.caches.get(key) === cached && project.caches.delete(key));
  }
  return cached;
}

/** Executes one GraphQL request for `auth` against `project`; the result is always a JSON document. */
export async function executeGraphql(
  project: ProjectRuntime,
  auth: RequestAuth,
  body: GraphqlRequestBody,
): Promise<Record<string, unknown>> {
  if (typeof body.query !== "string") return { data: null, errors: [{ message: "No query" }] };
  const { schema, resolvedPreset } = await schemaFor(project, auth.role);
  const result = await grafast({
    schema,
    source: body.query,
    variableValues: (body.variables ?? undefined) as Record<string, unknown> | undefined,
    operationName: typeof body.operationName === "string" ? body.operationName : undefined,
    resolvedPreset,
    requestContext: { strata: { auth } },
  });
  if (Symbol.asyncIterator in (result as object)) {
    return { data: null, errors: [{ message: "Subscriptions are not supported" }] };
  }
  const { data, errors } = result as { data?: unknown; errors?: readonly { message: string }[] };
  const out: Record<string, unknown> = { data: data ?? null };
  if (errors?.length) out.errors = errors.map((e) => ({ message: e.message }));
  return out;
}
