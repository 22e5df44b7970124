import express, { Router, type Request, type Response } from "express";
import { sql, type SQL } from "pg-sql2";
import type pg from "pg";
import type { RequestAuth } from "../auth/dataAuth";
import type { AppContext } from "../context";
import { queryInOneRoundTrip, withTransaction } from "../db/transaction";
import { GateError, openDataRequest } from "../http/gate";
import type { ProjectRuntime } from "../projects/runtime";
import { dataApiConfigOf, type DataApiConfig } from "../catalog/dataApiConfig";
import { errors, fromPgError, RestError } from "./errors";
import { buildRestOpenApi } from "../catalog/openapi";
import {
  planRead,
  resolveFunction,
  resultRelation,
  splitRpcQuery,
  targetRelation,
  type ReadNode,
} from "./plan";
import { parseApiRequest, type ApiRequest } from "./request/apiRequest";
import {
  commonHeaders,
  contentRange,
  JSON_TYPE,
  sendError,
  shapeBody,
  type StatementResult,
} from "./respond";
import { schemaCacheOf, type SchemaCache } from "../catalog/schemaCache";
import {
  deleteStatement,
  ensureColumns,
  functionCall,
  insertStatement,
  readStatement,
  scalarCallStatement,
  scalarSetStatement,
  setCallSource,
  updateStatement,
  type Page,
} from "./sql/statements";
import { requestSettingsOf } from "../http/requestSettings";

/** `/rest/v1`: the PostgREST-compatible REST route — parse → plan → sql → respond. */

interface Outcome {
  status: number;
  headers: Record<string, string>;
  body?: string;
  type?: string;
}

/** The root page: Range header and limit/offset, capped by max_rows. */
function rootPage(req: ApiRequest, config: DataApiConfig): Page & { offset: number } {
  const limitParam = req.limits.find((l) => l.path.length === 0)?.value;
  if (limitParam !== undefined && limitParam < 0)
    throw errors.invalidRange("Limit should be greater than or equal to zero.");
  const offsetParam = Math.max(0, req.offsets.find((o) => o.path.length === 0)?.value ?? 0);
  const offset = req.range?.offset ?? offsetParam;
  const limits = [limitParam, req.range?.limit, config.maxRows].filter((x): x is number => x !== undefined);
  return { offset, limit: limits.length ? Math.min(...limits) : undefined };
}

/** `Accept: application/vnd.pgrst.plan...`: the statement's EXPLAIN output replaces its result. */
class PlanAnswer {
  constructor(
    readonly type: string,
    readonly body: string,
  ) {}
}

/** Runs one statement and reads its envelope row (total, page, body, inserted). */
type Runner = (statement: SQL) => Promise<StatementResult>;

function resultOf(row: any): StatementResult {
  return {
    total: row.total === null ? null : Number(row.total),
    page: Number(row.page),
    body: row.body ?? "null",
    inserted: row.inserted === null ? null : Number(row.inserted),
  };
}

/** Inside a transaction the caller holds; with `explain`, the statement's plan answers instead. */
function clientRunner(client: pg.PoolClient, explain?: ApiRequest["explain"]): Runner {
  return async (statement) => {
    const { text, values } = sql.compile(statement);
    if (explain) {
      const options = [`format ${explain.format}`, ...explain.options].join(", ");
      const { rows } = await client.query(`explain (${options}) ${text}`, values as unknown[]);
      const plan =
        explain.format === "json"
          ? JSON.stringify(rows[0]["QUERY PLAN"])
          : rows.map((r) => r["QUERY PLAN"]).join("\n");
      throw new PlanAnswer(
        `application/vnd.pgrst.plan+${explain.format}; for="${explain.for}"; charset=utf-8`,
        plan,
      );
    }
    return resultOf((await client.query(text, values as unknown[])).rows[0]);
  };
}

/** Reads: the whole transaction in one network round trip. */
function oneTripRunner(project: ProjectRuntime, auth: RequestAuth, settings: Record<string, string>): Runner {
  return async (statement) => {
    const scope = { ...auth, settings, readOnly: true };
    const result = await queryInOneRoundTrip(project.dataPool, scope, sql.compile(statement));
    return resultOf(result.rows[0]);
  };
}

function readOutcome(req: ApiRequest, result: StatementResult, offset: number): Outcome {
  const headers: Record<string, string> = {
    "Content-Range": contentRange(offset, result.page, result.total),
  };
  if (result.total !== null && offset > 0 && offset >= result.total && result.page === 0) {
    throw errors.invalidRange(
      `An offset of ${offset} was requested, but there are only ${result.total} rows.`,
      {
        "Content-Range": `*/${result.total}`,
      },
    );
  }
  const partial = result.total !== null && result.page < result.total;
  const { type, body } = shapeBody(req, result);
  return { status: partial ? 206 : 200, headers, type, body };
}

function mutationOutcome(req: ApiRequest, result: StatementResult, node: ReadNode): Outcome {
  const counted = req.prefer.count ? String(result.page) : "*";
  const headers: Record<string, string> = {};
  let status: number;
  if (req.action === "insert") {
    headers["Content-Range"] = `*/${counted}`;
    status =
      req.prefer.resolution === "merge-duplicates" && result.page > 0 && result.inserted === 0 ? 200 : 201;
  } else {
    headers["Content-Range"] =
      req.action === "update" && result.page > 0 ? `0-${result.page - 1}/${counted}` : `*/${counted}`;
    status = req.prefer.return === "representation" ? 200 : 204;
  }
  if (req.media === "object" && result.page !== 1) throw errors.singular(result.page);
  if (req.prefer.return === "headers-only" && req.action === "insert") {
    const rows = JSON.parse(result.body) as Record<string, unknown>[];
    const pk = node.relation.primaryKey;
    if (rows[0] && pk.length) {
      headers.Location = `/${node.relation.name}?${pk.map((c) => `${c}=eq.${encodeURIComponent(String(rows[0][c]))}`).join("&")}`;
    }
    return { status, headers };
  }
  if (req.prefer.return !== "representation")
    return { status: req.action === "insert" ? status : 204, headers };
  const { type, body } = shapeBody(req, result);
  return { status, headers, type, body };
}

function insertRows(req: ApiRequest): Record<string, unknown>[] {
  const payload = req.payload ?? {};
  const rows = Array.isArray(payload) ? payload : [payload];
  if (!rows.every((r) => r !== null && typeof r === "object" && !Array.isArray(r))) {
    throw errors.invalidBody("Empty or invalid json");
  }
  return rows as Record<string, unknown>[];
}

function insertColumns(req: ApiRequest, rows: Record<string, unknown>[]): string[] {
  if (req.columns) return req.columns;
  const first = Object.keys(rows[0] ?? {});
  for (const r of rows) {
    const keys = Object.keys(r);
    if (keys.length !== first.length || !keys.every((k) => first.includes(k))) {
      throw errors.invalidBody("All object keys must match");
    }
  }
  return first;
}

/** Plans and runs one request inside the caller's transaction. */
async function execute(
  runner: Runner,
  cache: SchemaCache,
  req: ApiRequest,
  config: DataApiConfig,
): Promise<Outcome> {
  if (req.isRpc) return executeRpc(runner, cache, req, config);
  const relation = targetRelation(cache, req);
  const plan = planRead(cache, req, relation);
  const page = rootPage(req, config);
  switch (req.action) {
    case "read":
    case "head": {
      const result = await runner(readStatement(plan.root, page, !!req.prefer.count));
      return readOutcome(req, result, page.offset);
    }
    case "insert": {
      if (!relation.insertable) throw errors.notInsertable(relation.name);
      const rows = insertRows(req);
      const columns = insertColumns(req, rows);
      ensureColumns(relation, columns);
      if (rows.length === 0) {
        return mutationOutcome(req, { total: null, page: 0, body: "[]", inserted: 0 }, plan.root);
      }
      const onConflict = req.prefer.resolution
        ? {
            columns: req.onConflict ?? relation.primaryKey,
            action: req.prefer.resolution === "merge-duplicates" ? ("merge" as const) : ("ignore" as const),
          }
        : undefined;
      const statement = insertStatement(plan.root, {
        columns,
        rows,
        missingDefault: req.prefer.missing === "default",
        onConflict,
      });
      return mutationOutcome(req, await runner(statement), plan.root);
    }
    case "update": {
      const payload = (req.payload ?? {}) as Record<string, unknown>;
      if (typeof payload !== "object" || Array.isArray(payload) || payload === null)
        throw errors.invalidBody("Empty or invalid json");
      const columns = req.columns ?? Object.keys(payload);
      ensureColumns(relation, columns);
      if (columns.length === 0)
        return mutationOutcome(req, { total: null, page: 0, body: "[]", inserted: null }, plan.root);
      const limit = req.limits.find((l) => l.path.length === 0)?.value;
      const result = await runner(updateStatement(plan.root, columns, payload, { limit }));
      return mutationOutcome(req, result, plan.root);
    }
    case "delete": {
      const limit = req.limits.find((l) => l.path.length === 0)?.value;
      return mutationOutcome(req, await runner(deleteStatement(plan.root, { limit })), plan.root);
    }
    default:
      throw new RestError(405, "PGRST117", "Unsupported HTTP method");
  }
}

async function executeRpc(
  runner: Runner,
  cache: SchemaCache,
  req: ApiRequest,
  config: DataApiConfig,
): Promise<Outcome> {
  const fromQuery = req.action === "call" && req.payload === undefined && req.rpcArgs.size > 0;
  const args: Record<string, unknown> = fromQuery
    ? Object.fromEntries(splitRpcQuery(req, cache))
    : ((req.payload as Record<string, unknown> | undefined) ?? Object.fromEntries(splitRpcQuery(req, cache)));
  const fn = resolveFunction(cache, req, Object.keys(args));
  const page = rootPage(req, config);
  const viaQuery = fromQuery || req.payload === undefined;
  if (fn.returnsSet && fn.returnsComposite) {
    const relation = resultRelation(cache, fn);
    const plan = planRead(cache, req, relation);
    const result = await runner(
      readStatement(plan.root, page, !!req.prefer.count, setCallSource(fn, args, viaQuery)),
    );
    return readOutcome(req, result, page.offset);
  }
  if (fn.returnsSet) {
    const result = await runner(scalarSetStatement(setCallSource(fn, args, viaQuery), page));
    return readOutcome(req, result, page.offset);
  }
  const result = await runner(scalarCallStatement(functionCall(fn, args, viaQuery)));
  if (fn.returnsVoid) return { status: 204, headers: {} };
  if (req.media === "object") return { status: 200, headers: {}, type: JSON_TYPE, body: result.body };
  return { status: 200, headers: {}, type: JSON_TYPE, body: result.body };
}

function requestSettings(req: Request, apiReq: ApiRequest, config: DataApiConfig): Record<string, string> {
  const searchPath = [apiReq.schema, ...config.extraSearchPath.filter((s) => s !== apiReq.schema)];
  return {
    search_path: searchPath.map((s) => '"' + s.replace(/"/g, '""') + '"').join(", "),
    ...requestSettingsOf(req),
  };
}

async function handle(ctx: AppContext, req: Request, res: Response): Promise<void> {
  let auth: RequestAuth | undefined;
  try {
    const query = new URL(req.originalUrl, "http://localhost").searchParams;
    const opened = await openDataRequest(ctx, req, { query });
    const project = opened.project;
    auth = opened.auth;
    const config = await dataApiConfigOf(ctx, project);
    if ((req.path === "/" || req.path === "") && (req.method === "GET" || req.method === "HEAD")) {
      const doc = await buildRestOpenApi(project, config.schemas[0]);
      res
        .status(200)
        .type("application/openapi+json; charset=utf-8")
        .send(req.method === "HEAD" ? "" : JSON.stringify(doc));
      return;
    }
    const apiReq = parseApiRequest(
      {
        method: req.method,
        path: req.path,
        query,
        headers: req.headers,
        body: Buffer.isBuffer(req.body) ? req.body : undefined,
      },
      config.schemas,
    );
    const cache = await schemaCacheOf(project, config.schemas);
    const readOnly = req.method === "GET" || req.method === "HEAD";
    const settings = requestSettings(req, apiReq, config);
    const outcome =
      readOnly && !apiReq.explain
        ? await execute(oneTripRunner(project, auth, settings), cache, apiReq, config)
        : await withTransaction(project.dataPool, { ...auth, settings, readOnly }, (client) =>
            execute(clientRunner(client, apiReq.explain), cache, apiReq, config),
          );
    commonHeaders(res, apiReq);
    res.status(outcome.status).set(outcome.headers);
    if (outcome.type) res.type(outcome.type);
    if (req.method === "HEAD" || outcome.body === undefined) res.end();
    else res.send(outcome.body);
  } catch (e) {
    if (e instanceof PlanAnswer) res.status(200).type(e.type).send(e.body);
    else if (e instanceof RestError) sendError(res, e);
    else if (e instanceof GateError) res.status(e.status).json({ message: e.message, hint: e.hint });
    else if (e && typeof e === "object" && "code" in e && typeof (e as { code: unknown }).code === "string") {
      sendError(res, fromPgError(e as { code: string; message: string }, auth?.role === "anon"));
    } else {
      ctx.log.error({ err: e }, "REST request failed");
      sendError(res, new RestError(500, "PGRST000", "Internal server error"));
    }
  }
}

export function restRouter(ctx: AppContext): Router {
  const router = Router();
  router.use(express.raw({ type: () => true, limit: "20mb" }));
  router.use((req, res) => {
    void handle(ctx, req, res);
  });
  return router;
}
