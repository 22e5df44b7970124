import type { WithPgClient } from "@dataplan/pg";
import { makePgService } from "@dataplan/pg/adaptors/pg";
import { execute, hookArgs, isSafeError } from "grafast";
import { GraphQLError, Kind, type GraphQLSchema } from "grafast/graphql";
import { makeSchema } from "graphile-build";
import type { RequestAuth } from "../auth/dataAuth";
import { dataApiConfigOf } from "../catalog/dataApiConfig";
import type { AppContext } from "../context";
import {
  withPgClientInTransaction,
  withPipelinedTransaction,
  withReadsInOneRoundTrip,
} from "../db/transaction";
import type { StrataConfig } from "../config";
import type { ProjectRuntime } from "../projects/runtime";
import basePreset from "../../graphile.config";
import { limitsOf, planningDepthFor, type PgGqlLimits } from "../../plugins/PgGqlLimitsPlugin";
import { isMutationOperation, withMutationAwareClients } from "../../plugins/PgGqlMutationsPlugin";
import { prepareDocument, RequestError } from "./document";
import { RetryOnEngine, runWithoutEngine, WrittenButNotAnswered } from "./planRunner";
import { isDatabaseUnavailable } from "./unavailable";

interface RoleSchema {
  schema: GraphQLSchema;
  resolvedPreset: GraphileConfig.ResolvedPreset;
  limits: PgGqlLimits;
}

export interface GraphqlRequestBody {
  query?: unknown;
  variables?: unknown;
  operationName?: unknown;
}

type GraphqlResponse = Record<string, unknown>;

/** The GraphQL limits the environment sets (README's Environment table), over graphile.config.ts' own. */
function environmentPreset({ planningMs, ...limits }: StrataConfig["graphqlLimits"]): GraphileConfig.Preset {
  const grafast: GraphileConfig.GrafastOptions = {};
  if (planningMs !== undefined) grafast.timeouts = { planning: planningMs };
  if (limits.maxDepth !== undefined) grafast.maxPlanningDepth = planningDepthFor(limits.maxDepth);
  return { pgGraphql: limits, grafast };
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
          extends: [basePreset, environmentPreset(ctx.config.graphqlLimits)],
          pgServices: [
            makePgService({
              pool: project.dataPool,
              schemas,
              pgSettingsForIntrospection: { role },
            }),
          ],
        }),
      )
      .then(({ schema, resolvedPreset }) => ({ schema, resolvedPreset, limits: limitsOf(resolvedPreset) }));
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

/** After a failed statement the rest of the request's transaction only repeats that it is aborted. */
function isAbortedTransaction(error: GraphQLError): boolean {
  return (error.originalError as { code?: unknown } | undefined)?.code === "25P02";
}

function errorsOnly(ctx: AppContext, errors: readonly GraphQLError[]): GraphqlResponse {
  const reported = errors.filter((e) => !isAbortedTransaction(e));
  const masked = (reported.length ? reported : errors).map((e) => maskError(ctx, e));
  return errors.some((e) => e instanceof RequestError) ? { errors: masked } : { data: null, errors: masked };
}

/** Thrown out of the request's transaction to roll it back while keeping the response. */
class RolledBack {
  constructor(readonly response: GraphqlResponse) {}
}

/**
 * Runs a mutation request in one transaction, as pg_graphql does: every statement of every mutation
 * field on one client; any error rolls the whole request back. BEGIN, the settings and the savepoints grafast
 * asks for travel with the statements (withPipelinedTransaction): a one-statement mutation costs two round
 * trips, the statement's and the commit's.
 */
async function inOneTransaction(
  project: ProjectRuntime,
  auth: RequestAuth,
  settings: Record<string, string>,
  run: (withPgClient: WithPgClient) => Promise<GraphqlResponse>,
): Promise<GraphqlResponse> {
  try {
    return await withPipelinedTransaction(project.dataPool, { ...auth, settings }, async (tx) => {
      const response = await run(withPgClientInTransaction(tx));
      if (response.errors) throw new RolledBack(response);
      return response;
    });
  } catch (e) {
    if (e instanceof RolledBack) return e.response;
    throw e;
  }
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
 * The grafast context hookArgs makes for a request (the preset's `grafast.context`), for the plan runner;
 * null when it is made asynchronously (the runner then leaves the request to grafast).
 */
function contextOf(
  resolvedPreset: GraphileConfig.ResolvedPreset,
  requestContext: Grafast.RequestContext,
): Record<string, unknown> | null {
  const userContext = resolvedPreset.grafast?.context;
  const made = typeof userContext === "function" ? userContext(requestContext, {} as never) : userContext;
  if (made && typeof (made as PromiseLike<unknown>).then === "function") return null;
  return Object.assign(Object.create(null) as Record<string, unknown>, made);
}

/** Executes one GraphQL request for `auth` against `project`; the result is always a JSON document. */
export async function executeGraphql(
  ctx: AppContext,
  project: ProjectRuntime,
  auth: RequestAuth,
  body: GraphqlRequestBody,
  /** `request.method`, `request.path`, `request.headers` for RLS policies, as PostgREST sets them. */
  settings: Record<string, string> = {},
): Promise<GraphqlResponse> {
  if (typeof body.query !== "string") return { data: null, errors: [{ message: "No query" }] };
  const variables = body.variables ?? undefined;
  if (variables !== undefined && (typeof variables !== "object" || Array.isArray(variables))) {
    return { errors: [{ message: "variables must be an object" }] };
  }
  const operationName = typeof body.operationName === "string" ? body.operationName : undefined;
  let built: RoleSchema;
  try {
    built = await schemaFor(ctx, project, auth.role);
  } catch (e) {
    // A schema pg_graphql would not load either (a malformed comment directive): every request says why.
    if (e instanceof Error && isSafeError(e)) return { errors: [{ message: e.message }] };
    throw e;
  }
  const { schema, resolvedPreset, limits } = built;
  const prepared = prepareDocument(schema, body.query, operationName, limits);
  if (Array.isArray(prepared)) {
    const parsedErrors = prepared as readonly GraphQLError[];
    return errorsOnly(ctx, parsedErrors);
  }
  const { document, errors: gateErrors } = prepared as Exclude<typeof prepared, readonly GraphQLError[]>;
  const emptyOperation = document.definitions.some(
    (d) => d.kind === Kind.OPERATION_DEFINITION && d.selectionSet.selections.length === 0,
  );
  if (emptyOperation) return errorsOnly(ctx, gateErrors);
  const withGateErrors = (data: unknown): GraphqlResponse => {
    const out: GraphqlResponse = { data: data ?? null };
    if (gateErrors.length) out.errors = gateErrors.map((e) => maskError(ctx, e));
    return out;
  };
  const isMutation = isMutationOperation(document, operationName);
  const run = async (withPgClient: WithPgClient): Promise<GraphqlResponse> => {
    const requestContext: Grafast.RequestContext = { strata: { auth, withPgClient } };
    if (ctx.config.graphqlPlanRunner) {
      const context = contextOf(resolvedPreset, requestContext);
      if (context && isMutation) withMutationAwareClients(context, resolvedPreset.pgServices ?? []);
      let data: string | null;
      try {
        data = context
          ? await runWithoutEngine({
              schema,
              document,
              operationName,
              variables: variables as Record<string, unknown> | undefined,
              context,
              options: resolvedPreset.grafast,
            })
          : null;
      } catch (e) {
        // A mutation's statement the database (or atMost) refused: grafast's engine answers it with that
        // message alone, and so does this (the transaction rolls back on an answer with errors).
        const cause = e instanceof RetryOnEngine ? e.cause : undefined;
        if (isDatabaseError(cause) || (cause instanceof Error && isSafeError(cause))) {
          return { data: null, errors: [{ message: (cause as Error).message }] };
        }
        throw e;
      }
      if (data !== null) return withGateErrors(data);
    }
    return runOnEngine(requestContext);
  };
  const runOnEngine = async (requestContext: Grafast.RequestContext): Promise<GraphqlResponse> => {
    const args = await hookArgs({
      schema,
      document,
      variableValues: variables as Record<string, unknown> | undefined,
      operationName,
      resolvedPreset,
      // A context of our own: without one, hookArgs finds out by catching a TypeError (an Error per request).
      // A plain object: one made by Object.create(null) starts in V8's slow dictionary mode.
      contextValue: {} as Record<string, unknown>,
      requestContext,
      // Grafast writes the data as JSON text from its output plan: no object tree to build and stringify.
      outputDataAsString: true,
    });
    const result = await execute(args);
    if (Symbol.asyncIterator in (result as object)) {
      return { data: null, errors: [{ message: "Subscriptions are not supported" }] };
    }
    const { data, errors } = result as { data?: unknown; errors?: readonly GraphQLError[] };
    // The database out of reach or no connection free: the router answers the whole request 503.
    const unavailable = errors?.find((e) => isDatabaseUnavailable(e.originalError));
    if (unavailable) throw unavailable.originalError;
    // pg_graphql answers a failed request as a whole: no partial data next to an error.
    if (errors?.length) return errorsOnly(ctx, errors);
    return withGateErrors(data);
  };
  if (!isMutation) return run(withReadsInOneRoundTrip(project.dataPool, { ...auth, settings }));
  try {
    try {
      return await inOneTransaction(project, auth, settings, run);
    } catch (e) {
      if (e instanceof WrittenButNotAnswered) {
        // Its statements succeeded and may be committed: it must not run again.
        ctx.log.warn({ err: e.cause }, "graphql mutation written but not answered");
        return { data: null, errors: [{ message: "Internal server error" }] };
      }
      if (!(e instanceof RetryOnEngine)) throw e;
      // Its statement failed and its transaction is rolled back: grafast's engine runs it again and says why.
      return await inOneTransaction(project, auth, settings, (withPgClient) =>
        runOnEngine({ strata: { auth, withPgClient } }),
      );
    }
  } catch (e) {
    // The commit itself failed (a deferred constraint, a serialization failure): nothing was written.
    if (isDatabaseError(e) && !isDatabaseUnavailable(e)) {
      return { data: null, errors: [{ message: (e as Error).message }] };
    }
    throw e;
  }
}
