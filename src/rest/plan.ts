import type { DataApiConfig } from "../catalog/dataApiConfig";
import type { RestFunction, Relation, SchemaCache } from "../catalog/schemaCache";
import { errors, RestError } from "./errors";
import {
  planReadNode,
  resolveFunction,
  resultRelation,
  splitRpcQuery,
  targetRelation,
  type ReadNode,
} from "./readPlan";
import type { ApiRequest } from "./request/apiRequest";

/**
 * Stage 2: what a request will do, resolved against the schema cache. Every 4xx that depends on the schema
 * or the payload is raised here; the SQL stage only renders a plan and the response stage only shapes the
 * result.
 */

export interface Page {
  limit?: number;
  offset?: number;
}

/** GET/HEAD on a table or view. */
export interface ReadPlan {
  kind: "read";
  root: ReadNode;
  page: Page & { offset: number };
  count: boolean;
}

export interface InsertSpec {
  columns: string[];
  rows: Record<string, unknown>[];
  /** Missing keys take the column default instead of NULL. */
  missingDefault: boolean;
  onConflict?: { columns: string[]; action: "merge" | "ignore" };
}

/** POST, PATCH or DELETE on a table or view; `root` shapes the affected rows of the response. */
export type MutatePlan =
  | { kind: "insert"; root: ReadNode; insert: InsertSpec }
  | { kind: "update"; root: ReadNode; columns: string[]; payload: Record<string, unknown>; limit?: number }
  | { kind: "delete"; root: ReadNode; limit?: number };

/** What a function's result becomes: rows read like a relation, a JSON array of scalars, or one value. */
export type CallResult =
  { kind: "rows"; root: ReadNode; count: boolean } | { kind: "scalars" } | { kind: "value" };

/** `/rpc/<fn>`: the function, its arguments and how its result is read. */
export interface CallPlan {
  kind: "call";
  fn: RestFunction;
  args: Record<string, unknown>;
  /** Arguments from the query string arrive as text, cast to the argument types. */
  viaQuery: boolean;
  page: Page & { offset: number };
  result: CallResult;
}

export type Plan = ReadPlan | MutatePlan | CallPlan;

/** The root page: Range header and limit/offset, capped by max_rows. */
function rootPage(req: ApiRequest, config: DataApiConfig): Page & { offset: number } {
  const limitParam = rootLimit(req);
  if (limitParam !== undefined && limitParam < 0)
    throw errors.invalidRange("Limit should be greater than or equal to zero.");
  const offsetParam = Math.max(0, req.offsets.find((o) => o.path.length === 0)?.value ?? 0);
  const offset = req.range?.offset ?? offsetParam;
  const limits = [limitParam, req.range?.limit, config.maxRows].filter((x): x is number => x !== undefined);
  return { offset, limit: limits.length ? Math.min(...limits) : undefined };
}

const rootLimit = (req: ApiRequest) => req.limits.find((l) => l.path.length === 0)?.value;

function ensureColumns(relation: Relation, columns: string[]): void {
  for (const c of columns)
    if (!relation.columns.some((col) => col.name === c)) throw errors.unknownColumn(c, relation.name);
}

function insertRows(req: ApiRequest): Record<string, unknown>[] {
  const payload = req.payload ?? {};
  const rows = Array.isArray(payload) ? payload : [payload];
  if (!rows.every((r) => r !== null && typeof r === "object" && !Array.isArray(r))) {
    throw errors.invalidBody("Empty or invalid json");
  }
  return rows as Record<string, unknown>[];
}

/** `columns=` when given; else the keys of the rows, which must all have the same. */
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

function planInsert(req: ApiRequest, relation: Relation, root: ReadNode): MutatePlan {
  if (!relation.insertable) throw errors.notInsertable(relation.name);
  const rows = insertRows(req);
  const columns = insertColumns(req, rows);
  ensureColumns(relation, columns);
  const resolution = req.prefer.resolution;
  const onConflict = resolution
    ? {
        columns: req.onConflict ?? relation.primaryKey,
        action: resolution === "merge-duplicates" ? ("merge" as const) : ("ignore" as const),
      }
    : undefined;
  return {
    kind: "insert",
    root,
    insert: { columns, rows, missingDefault: req.prefer.missing === "default", onConflict },
  };
}

function planUpdate(req: ApiRequest, relation: Relation, root: ReadNode): MutatePlan {
  const payload = (req.payload ?? {}) as Record<string, unknown>;
  if (typeof payload !== "object" || Array.isArray(payload) || payload === null)
    throw errors.invalidBody("Empty or invalid json");
  const columns = req.columns ?? Object.keys(payload);
  ensureColumns(relation, columns);
  return { kind: "update", root, columns, payload, limit: rootLimit(req) };
}

function planCall(cache: SchemaCache, req: ApiRequest, config: DataApiConfig): CallPlan {
  const fromQuery = splitRpcQuery(req, cache);
  const payload = req.payload as Record<string, unknown> | undefined;
  const args = payload ?? Object.fromEntries(fromQuery.args);
  const fn = resolveFunction(cache, req, Object.keys(args));
  const page = rootPage(req, config);
  const plan = { kind: "call" as const, fn, args, viaQuery: payload === undefined, page };
  if (fn.returnsSet && fn.returnsComposite) {
    const root = planReadNode(cache, req, resultRelation(cache, fn), fromQuery.filters);
    return { ...plan, result: { kind: "rows", root, count: !!req.prefer.count } };
  }
  return { ...plan, result: { kind: fn.returnsSet ? "scalars" : "value" } };
}

/** Plans one parsed request against the schema cache. */
export function planRequest(cache: SchemaCache, req: ApiRequest, config: DataApiConfig): Plan {
  if (req.explain && !config.planEnabled) throw errors.unacceptableMedia("application/vnd.pgrst.plan");
  if (req.isRpc) return planCall(cache, req, config);
  const relation = targetRelation(cache, req);
  const root = planReadNode(cache, req, relation);
  const page = rootPage(req, config);
  switch (req.action) {
    case "read":
    case "head":
      return { kind: "read", root, page, count: !!req.prefer.count };
    case "insert":
      return planInsert(req, relation, root);
    case "update":
      return planUpdate(req, relation, root);
    case "delete":
      return { kind: "delete", root, limit: rootLimit(req) };
    default:
      throw new RestError(405, "PGRST117", "Unsupported HTTP method");
  }
}
