import express, { Router, type Request, type RequestHandler, type Response } from "express";
import type pg from "pg";
import { escapeSqlIdentifier, sql, type SQL } from "pg-sql2";
import type { RequestAuth } from "../auth/dataAuth";
import { roleSettingsOf } from "../catalog/roleSettings";
import { dataApiConfigOf, type DataApiConfig } from "../catalog/dataApiConfig";
import { buildRestOpenApi } from "../catalog/openapi";
import { schemaCacheOf } from "../catalog/schemaCache";
import type { AppContext } from "../context";
import { rawBody } from "../http/plainBody";
import {
  asPoolTimeout,
  isDatabaseUnreachable,
  queryInOneRoundTrip,
  withTransaction,
  type TransactionScope,
} from "../db/transaction";
import { GateError, openDataRequest } from "../http/gate";
import { requestSettingsOf } from "../http/requestSettings";
import { sendText } from "../http/sendText";
import { fromPgError, RestError } from "./errors";
import type { Plan } from "./plan";
import { plannedRequest, type PlannedRequest } from "./plannedRequest";
import type { ApiRequest } from "./request/apiRequest";
import {
  commonHeaders,
  JSON_TYPE,
  NO_ROWS,
  outcomeOf,
  sendError,
  type Outcome,
  type StatementResult,
} from "./respond";
import { statementOf } from "./sql/statements";

/**
 * `/rest/v1`, the PostgREST-compatible REST route: the data gate, then parse (request/) → plan (plan.ts)
 * → sql (sql/) → run (here, in one transaction) → respond (respond.ts).
 */

/** `Accept: application/vnd.pgrst.plan...`: thrown out of the transaction (so that EXPLAIN ANALYZE of a
 * write rolls back) with the statement's plan, which answers instead of its result. */
class ExplainOutput {
  constructor(
    readonly type: string,
    readonly body: string,
  ) {}
}

function resultOf(row: any): StatementResult {
  return {
    total: row.total === null ? null : Number(row.total),
    page: Number(row.page),
    body: row.body ?? "null",
    inserted: row.inserted === null ? null : Number(row.inserted),
  };
}

/** EXPLAIN's options as fixed fragments (the request only picks among them). */
const EXPLAIN_OPTIONS: Record<string, SQL> = {
  analyze: sql`analyze`,
  verbose: sql`verbose`,
  settings: sql`settings`,
  buffers: sql`buffers`,
  wal: sql`wal`,
};

async function explain(client: pg.PoolClient, statement: SQL, options: NonNullable<ApiRequest["explain"]>) {
  const format = options.format === "json" ? sql`format json` : sql`format text`;
  const chosen = options.options.flatMap((o) => (EXPLAIN_OPTIONS[o] ? [EXPLAIN_OPTIONS[o]] : []));
  const { text, values } = sql.compile(sql`explain (${sql.join([format, ...chosen], ", ")}) ${statement}`);
  const { rows } = await client.query(text, values as unknown[]);
  const plan =
    options.format === "json"
      ? JSON.stringify(rows[0]["QUERY PLAN"])
      : rows.map((r) => r["QUERY PLAN"]).join("\n");
  return new ExplainOutput(
    `application/vnd.pgrst.plan+${options.format}; for="${options.for}"; charset=utf-8`,
    plan,
  );
}

/** Runs the plan's statement on a client in the request's transaction and shapes the response there. */
async function runInTransaction(
  client: pg.PoolClient,
  { apiReq, plan, statement }: PlannedRequest,
): Promise<Outcome> {
  if (statement && apiReq.explain) throw await explain(client, statementOf(plan)!, apiReq.explain);
  if (!statement) return outcomeOf(apiReq, plan, NO_ROWS);
  const { rows } = await client.query(statement.text, statement.values as unknown[]);
  return outcomeOf(apiReq, plan, resultOf(rows[0]));
}

/**
 * Whether a write's response can no longer fail once its statement has succeeded (see outcomeOf): then the
 * statement may commit by itself. A singular request (406 unless exactly one row) and a call's offset past
 * its end (416) must still roll the write back.
 */
function answerCannotFail(apiReq: ApiRequest, plan: Plan): boolean {
  if (apiReq.media === "object") return false;
  return plan.kind !== "call" || plan.page.offset === 0;
}

/**
 * Stage 3: runs a plan. A read, and a write whose answer cannot fail afterwards, travels in one network round
 * trip (settings and statement as one implicit transaction); other writes, calls and EXPLAIN run in a
 * transaction of their own, so the response is decided before the commit.
 */
async function run(pool: pg.Pool, scope: TransactionScope, request: PlannedRequest): Promise<Outcome> {
  const { apiReq, plan, statement } = request;
  if (!apiReq.explain && (scope.readOnly || answerCannotFail(apiReq, plan))) {
    const result = statement
      ? resultOf((await queryInOneRoundTrip(pool, scope, statement)).rows[0])
      : NO_ROWS;
    return outcomeOf(apiReq, plan, result);
  }
  return withTransaction(pool, scope, (client) => runInTransaction(client, request));
}

/** The transaction's settings: search_path (the request's schema first) and the request's method, path, headers. */
function requestSettings(req: Request, apiReq: ApiRequest, config: DataApiConfig): Record<string, string> {
  const searchPath = [apiReq.schema, ...config.extraSearchPath.filter((s) => s !== apiReq.schema)];
  return { search_path: searchPath.map(escapeSqlIdentifier).join(", "), ...requestSettingsOf(req) };
}

function send(res: Response, req: Request, apiReq: ApiRequest, outcome: Outcome): void {
  commonHeaders(res, apiReq);
  res.status(outcome.status).set(outcome.headers);
  if (req.method !== "HEAD" && outcome.body !== undefined) {
    sendText(res, outcome.status, outcome.type ?? JSON_TYPE, outcome.body);
    return;
  }
  if (outcome.type) res.type(outcome.type);
  res.end();
}

/** A PostgreSQL SQLSTATE: five digits or capital letters (a Node network error's code is not one). */
const isSqlState = (code: unknown): code is string => typeof code === "string" && /^[0-9A-Z]{5}$/.test(code);

/** Every failure of a REST request in PostgREST's error format: the one place errors are mapped. */
function sendFailure(ctx: AppContext, res: Response, caught: unknown, auth: RequestAuth | undefined): void {
  // pg-pool's wait timeout of any pool the request used (the control plane's reads opaque keys) is a PoolTimeout.
  const e = asPoolTimeout(caught);
  if (e instanceof ExplainOutput) res.status(200).type(e.type).send(e.body);
  else if (e instanceof RestError) sendError(res, e);
  else if (e instanceof GateError) res.status(e.status).json({ message: e.message, hint: e.hint });
  else if (isDatabaseUnreachable(e)) {
    // The database is out of reach (a network error, a shutdown), not a failed statement.
    sendError(res, new RestError(503, "PGRST001", "Database client error. Retrying the connection."));
  } else if (isSqlState((e as { code?: unknown })?.code)) {
    sendError(res, fromPgError(e as { code: string; message: string }, auth?.role === "anon"));
  } else {
    ctx.log.error({ err: e }, "REST request failed");
    sendError(res, new RestError(500, "PGRST000", "Internal server error"));
  }
}

/** The request target's query string, without `?` and any fragment. */
function rawQueryOf(target: string): string {
  const start = target.indexOf("?");
  if (start === -1) return "";
  const end = target.indexOf("#", start);
  return target.slice(start + 1, end === -1 ? undefined : end);
}

/** One REST request (Express' request and response: the Express route and the data path in dataPath.ts). */
export async function handleRest(ctx: AppContext, req: Request, res: Response): Promise<void> {
  let auth: RequestAuth | undefined;
  try {
    const rawQuery = rawQueryOf(req.originalUrl);
    // What `new URL(target).searchParams` gives, without a whole URL.
    const query = new URLSearchParams(rawQuery);
    const opened = await openDataRequest(ctx, req, { query });
    const project = opened.project;
    auth = opened.auth;
    if ((req.path === "/" || req.path === "") && (req.method === "GET" || req.method === "HEAD")) {
      const role = auth.role;
      // Built from the caches alone: confirmed current afterwards, as a plan's error is (a change made through
      // another node may not have been heard of yet).
      const doc = await project.onCurrentSchema(async (schemaVersion) => {
        const config = await dataApiConfigOf(ctx, project);
        const built = await buildRestOpenApi(project, config.schemas[0], role);
        await project.confirmSchemaVersion(schemaVersion);
        return built;
      });
      res
        .status(200)
        .type("application/openapi+json; charset=utf-8")
        .send(req.method === "HEAD" ? "" : JSON.stringify(doc));
      return;
    }
    const input = {
      method: req.method,
      path: req.path,
      query,
      headers: req.headers,
      body: Buffer.isBuffer(req.body) ? req.body : undefined,
    };
    const requestAuth = auth;
    const { apiReq, outcome } = await project.onCurrentSchema(async (schemaVersion) => {
      let request: PlannedRequest;
      let config: DataApiConfig;
      try {
        config = await dataApiConfigOf(ctx, project);
        request = plannedRequest(input, rawQuery, await schemaCacheOf(project, config.schemas), config);
      } catch (e) {
        // A plan's error comes from the schema cache alone: is it still the database's?
        if (e instanceof RestError) await project.confirmSchemaVersion(schemaVersion);
        throw e;
      }
      if (!request.statement) await project.confirmSchemaVersion(schemaVersion);
      const readOnly = req.method === "GET" || req.method === "HEAD";
      const settings = {
        ...(await roleSettingsOf(project, requestAuth.role)),
        ...requestSettings(req, request.apiReq, config),
      };
      const scope = { ...requestAuth, settings, readOnly, schemaVersion };
      // Reads go to the project's read replicas when it has any (writes, calls by POST and GraphQL stay on
      // the primary); a read right after a write may not see it yet, as with any asynchronous replica.
      const pool = readOnly ? project.readPool : project.dataPool;
      return { apiReq: request.apiReq, outcome: await run(pool, scope, request) };
    });
    send(res, req, apiReq, outcome);
  } catch (e) {
    sendFailure(ctx, res, e, auth);
  }
}

/**
 * The request body, any type, as bytes (the same parser on the Express route and the data path); the common
 * body is read without body-parser's per-request machinery (plainBody).
 */
const REST_BODY_LIMIT = 20 * 1024 * 1024;
export const restBody: RequestHandler = rawBody(
  express.raw({ type: () => true, limit: REST_BODY_LIMIT }),
  REST_BODY_LIMIT,
);

export function restRouter(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  router.use(restBody);
  router.use((req, res) => {
    void handleRest(ctx, req, res);
  });
  return router;
}
