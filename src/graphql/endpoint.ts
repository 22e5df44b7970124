import { makePgService } from "@dataplan/pg/adaptors/pg";
import { grafast, isSafeError } from "grafast";
import type { ExecutionResult, GraphQLSchema } from "grafast/graphql";
import { makeSchema } from "graphile-build";
import type { RequestAuth } from "../auth/dataAuth";
import { dataApiConfigOf } from "../catalog/dataApiConfig";
import type { AppContext } from "../context";
import { isSchemaChanged } from "../db/errors";
import type { ProjectRuntime } from "../projects/runtime";
import basePreset from "../../graphile.config";
import { planningDepthFor } from "../../plugins/PgGqlLimitsPlugin";
import { pgGqlOriginalError } from "../../plugins/pgGqlErrors";
import { requestPgClients } from "./pgClients";
import { isDatabaseUnavailable } from "./unavailable";

interface RoleSchema {
  schema: GraphQLSchema;
  resolvedPreset: GraphileConfig.ResolvedPreset;
}

export interface GraphqlRequestBody {
  query?: unknown;
  variables?: unknown;
  operationName?: unknown;
}

/** A GraphQL answer: `data` as JSON text (grafast's `outputDataAsString`) or null, errors with their messages. */
type GraphqlResponse = Record<string, unknown>;

/**
 * What the server adds to graphile.config.ts: the GraphQL limits the environment sets (README's Environment
 * table), and its log for errors answered "Internal server error" (not the database out of reach: the router
 * answers that 503).
 */
function serverPreset(ctx: AppContext): GraphileConfig.Preset {
  const { planningMs, ...limits } = ctx.config.graphqlLimits;
  const grafast: GraphileConfig.GrafastOptions = {};
  if (planningMs !== undefined) grafast.timeouts = { planning: planningMs };
  if (limits.maxDepth !== undefined) grafast.maxPlanningDepth = planningDepthFor(limits.maxDepth);
  const onInternalError = (err: Error) => {
    if (!isDatabaseUnavailable(err)) ctx.log.warn({ err }, "graphql request failed");
  };
  return { pgGraphql: { ...limits, onInternalError }, grafast };
}

/**
 * The schema a role sees in a project, built from that role's privileges on first use and kept in the
 * project's schema caches until the schema changes.
 */
function schemaFor(ctx: AppContext, project: ProjectRuntime, role: string): Promise<RoleSchema> {
  const key = `graphql:${role}`;
  let cached = project.caches.get(key) as Promise<RoleSchema> | undefined;
  if (!cached) {
    cached = dataApiConfigOf(ctx, project)
      .then(({ schemas }) =>
        makeSchema({
          extends: [basePreset, serverPreset(ctx)],
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

/**
 * A response as JSON text: `data` may already be JSON text (grafast's `outputDataAsString`), spliced in as
 * it is; `data` comes first, as pg_graphql answers it.
 */
export function graphqlResponseText(response: GraphqlResponse): string {
  const { data, ...rest } = response;
  if (typeof data !== "string") return JSON.stringify(response);
  const more = Object.keys(rest).length ? `,${JSON.stringify(rest).slice(1, -1)}` : "";
  return `{"data":${data}${more}}`;
}

/**
 * Executes one GraphQL request for `auth` against `project` through grafast, with the preset's middleware
 * (pg_graphql's document rules, errors and one transaction per request); the result is always a JSON document.
 * The database out of reach or without a free connection is thrown, for the router to answer 503.
 */
export async function executeGraphql(
  ctx: AppContext,
  project: ProjectRuntime,
  auth: RequestAuth,
  body: GraphqlRequestBody,
  /** `request.method`, `request.path`, `request.headers` for RLS policies, as PostgREST sets them. */
  settings: Record<string, string> = {},
): Promise<GraphqlResponse> {
  const source = body.query;
  if (typeof source !== "string") return { data: null, errors: [{ message: "No query" }] };
  const variables = body.variables ?? undefined;
  if (variables !== undefined && (typeof variables !== "object" || Array.isArray(variables))) {
    return { errors: [{ message: "variables must be an object" }] };
  }
  return project.onCurrentSchema(async (schemaVersion) => {
    let built: RoleSchema;
    try {
      built = await schemaFor(ctx, project, auth.role);
    } catch (e) {
      // A schema pg_graphql would not load either (a malformed comment directive): every request says why.
      if (!(e instanceof Error && isSafeError(e))) throw e;
      await project.confirmSchemaVersion(schemaVersion);
      return { errors: [{ message: e.message }] };
    }
    const withPgClient = requestPgClients(project.dataPool, { ...auth, settings, schemaVersion });
    const result = await grafast({
      schema: built.schema,
      resolvedPreset: built.resolvedPreset,
      source,
      variableValues: variables as Record<string, unknown> | undefined,
      operationName: typeof body.operationName === "string" ? body.operationName : undefined,
      // A plain object of our own: without one, grafast makes a prototype-less one (slow dictionary mode in V8).
      contextValue: {},
      requestContext: {
        strata: { auth, withPgClient },
      },
    });
    if (Symbol.asyncIterator in result)
      return { data: null, errors: [{ message: "Subscriptions are not supported" }] };
    const { errors } = result as ExecutionResult;
    // The database out of reach, or the schema changed since it was planned (planned again): thrown.
    const thrown = errors
      ?.map(pgGqlOriginalError)
      .find((e) => isDatabaseUnavailable(e) || isSchemaChanged(e));
    if (thrown) throw thrown;
    // Answered from the schema alone (a document's errors, an introspection): is it still the database's?
    if (!withPgClient.sentStatement) await project.confirmSchemaVersion(schemaVersion);
    return result as GraphqlResponse;
  });
}
