import { stringify } from "csv-stringify/sync";
import type { Response } from "express";
import type { ApiRequest } from "./request/apiRequest";
import { errors, type RestError } from "./errors";

/** Stage 4: status, headers and body of a REST response, as PostgREST (Response.hs) gives them. */

export interface StatementResult {
  total: number | null;
  page: number;
  body: string;
  inserted: number | null;
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
