import { stringify } from "csv-stringify/sync";
import type { Response } from "express";
import type { ApiRequest } from "./request/apiRequest";
import { errors, type RestError } from "./errors";
import type { MutatePlan, Plan } from "./plan";

/** Stage 4: status, headers and body of a REST response, as PostgREST (Response.hs) gives them. */

export interface StatementResult {
  total: number | null;
  page: number;
  body: string;
  inserted: number | null;
}

/** What a plan that runs no statement (nothing to insert or set) answers. */
export const NO_ROWS: StatementResult = { total: null, page: 0, body: "[]", inserted: null };

/** A response before it is sent. */
export interface Outcome {
  status: number;
  headers: Record<string, string>;
  body?: string;
  type?: string;
}

export const JSON_TYPE = "application/json; charset=utf-8";

export function sendError(res: Response, e: RestError): void {
  res.status(e.status).set(e.headers).type(JSON_TYPE).send(JSON.stringify(e.body()));
}

/** Rows as CSV: a header line, NULL as an empty field, JSON values as their JSON text. */
export function toCsv(rows: Record<string, unknown>[], columns?: string[]): string {
  const cols = columns ?? (rows[0] ? Object.keys(rows[0]) : []);
  const csv = stringify(rows, {
    header: true,
    columns: cols,
    record_delimiter: "unix",
    quoted_match: /\r/,
    cast: { boolean: String, object: (v) => JSON.stringify(v) },
  });
  // PostgREST ends the last row without a line break; the header alone when there are no rows.
  return csv.endsWith("\n") ? csv.slice(0, -1) : csv;
}

/** The body in the negotiated media type; a singular request that is not exactly one row fails (406). */
export function shapeBody(
  req: ApiRequest,
  result: StatementResult,
  columns?: string[],
): { type: string; body: string } {
  if (req.media === "object") {
    if (result.page !== 1) throw errors.singular(result.page);
    const rows = JSON.parse(result.body);
    return {
      type: "application/vnd.pgrst.object+json; charset=utf-8",
      body: JSON.stringify(Array.isArray(rows) ? rows[0] : rows),
    };
  }
  if (req.media === "csv")
    return { type: "text/csv; charset=utf-8", body: toCsv(JSON.parse(result.body), columns) };
  return { type: JSON_TYPE, body: result.body };
}

export function contentRange(offset: number, page: number, total: number | null): string {
  const totalText = total === null ? "*" : String(total);
  return page === 0 ? `*/${totalText}` : `${offset}-${offset + page - 1}/${totalText}`;
}

export function commonHeaders(res: Response, req: ApiRequest): void {
  if (req.profileNegotiated) res.set("Content-Profile", req.schema);
  const applied = [
    req.prefer.resolution && `resolution=${req.prefer.resolution}`,
    req.prefer.missing && `missing=${req.prefer.missing}`,
    req.prefer.return && `return=${req.prefer.return}`,
    req.prefer.count && `count=${req.prefer.count}`,
  ].filter(Boolean);
  if (applied.length) res.set("Preference-Applied", applied.join(", "));
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

function mutationOutcome(req: ApiRequest, plan: MutatePlan, result: StatementResult): Outcome {
  const counted = req.prefer.count ? String(result.page) : "*";
  const headers: Record<string, string> = {};
  let status: number;
  if (plan.kind === "insert") {
    headers["Content-Range"] = `*/${counted}`;
    status =
      req.prefer.resolution === "merge-duplicates" && result.page > 0 && result.inserted === 0 ? 200 : 201;
  } else {
    headers["Content-Range"] =
      plan.kind === "update" && result.page > 0 ? `0-${result.page - 1}/${counted}` : `*/${counted}`;
    status = req.prefer.return === "representation" ? 200 : 204;
  }
  if (req.media === "object" && result.page !== 1) throw errors.singular(result.page);
  if (req.prefer.return === "headers-only" && plan.kind === "insert") {
    const rows = JSON.parse(result.body) as Record<string, unknown>[];
    const relation = plan.root.relation;
    const pk = relation.primaryKey;
    if (rows[0] && pk.length) {
      headers.Location = `/${relation.name}?${pk.map((c) => `${c}=eq.${encodeURIComponent(String(rows[0][c]))}`).join("&")}`;
    }
    return { status, headers };
  }
  if (req.prefer.return !== "representation")
    return { status: plan.kind === "insert" ? status : 204, headers };
  const { type, body } = shapeBody(req, result);
  return { status, headers, type, body };
}

/**
 * Stage 4: the response to a plan's result. Runs inside the request's transaction, so that a write whose
 * response fails (a singular request that affected two rows) rolls back.
 */
export function outcomeOf(req: ApiRequest, plan: Plan, result: StatementResult): Outcome {
  switch (plan.kind) {
    case "read":
      return readOutcome(req, result, plan.page.offset);
    case "call":
      if (plan.result.kind !== "value") return readOutcome(req, result, plan.page.offset);
      if (plan.fn.returnsVoid) return { status: 204, headers: {} };
      return { status: 200, headers: {}, type: JSON_TYPE, body: result.body };
    default:
      return mutationOutcome(req, plan, result);
  }
}
