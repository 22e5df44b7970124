import { parse as parseCsv } from "csv-parse/sync";
import Negotiator from "negotiator";
import parseRangeHeader from "range-parser";
import { errors, RestError } from "../errors";
import {
  parseColumnList,
  parseField,
  parseFilterValue,
  parseLogicTree,
  parseOrder,
  parseSelect,
  type Filter,
  type LogicTree,
  type OrderTerm,
  type SelectItem,
} from "./grammar";

/**
 * Stage 1: the HTTP request parsed into what was asked (ApiRequest.hs). No database, no schema: names
 * are resolved by the planner.
 */

export type Action = "read" | "head" | "insert" | "update" | "delete" | "call";

export interface Preferences {
  return?: "minimal" | "representation" | "headers-only";
  count?: "exact" | "planned" | "estimated";
  resolution?: "merge-duplicates" | "ignore-duplicates";
  missing?: "default" | "null";
  handling?: "strict" | "lenient";
  /** Preferences to echo in Preference-Applied. */
  applied: string[];
}

export type MediaType = "json" | "object" | "csv" | "plan" | "openapi" | "geojson";

/** Something scoped to an embed path (`clients.projects.order=...`); the root is []. */
export interface Scoped<T> {
  path: string[];
  value: T;
}

export interface ApiRequest {
  action: Action;
  /** Table or view name, or the function name for `/rpc/<fn>`. */
  target: string;
  isRpc: boolean;
  schema: string;
  /** True when the client named the schema with a profile header: the response repeats it. */
  profileNegotiated: boolean;
  select: SelectItem[];
  filters: Scoped<Filter>[];
  logic: Scoped<LogicTree>[];
  order: Scoped<OrderTerm[]>[];
  limits: Scoped<number>[];
  offsets: Scoped<number>[];
  /** From the Range header (root only). */
  range?: { offset: number; limit?: number };
  columns?: string[];
  onConflict?: string[];
  prefer: Preferences;
  media: MediaType;
  /** Parsed JSON body (POST/PATCH, rpc POST). */
  payload?: unknown;
  /** Arguments of a GET/HEAD rpc call, from the query string. */
  rpcArgs: Map<string, string>;
  /** Set for `Accept: application/vnd.pgrst.plan+text|json`: answer with the EXPLAIN output. */
  explain?: { format: "text" | "json"; for: string; options: string[] };
}

export interface HttpInput {
  method: string;
  /** Path below /rest/v1, e.g. `/items` or `/rpc/fn`. */
  path: string;
  query: URLSearchParams;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer | undefined;
}

const header = (h: HttpInput["headers"], name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v.join(", ") : v;
};

function parsePrefer(value: string | undefined): Preferences {
  const prefer: Preferences = { applied: [] };
  for (const raw of (value ?? "").split(",")) {
    const item = raw.trim();
    const [k, v] = item.split("=").map((s) => s?.trim());
    if (k === "return" && (v === "minimal" || v === "representation" || v === "headers-only"))
      prefer.return = v;
    else if (k === "count" && (v === "exact" || v === "planned" || v === "estimated")) prefer.count = v;
    else if (k === "resolution" && (v === "merge-duplicates" || v === "ignore-duplicates"))
      prefer.resolution = v;
    else if (k === "missing" && (v === "default" || v === "null")) prefer.missing = v;
    else if (k === "handling" && (v === "strict" || v === "lenient")) prefer.handling = v;
    else if (item && prefer.handling === "strict") {
      throw new RestError(
        400,
        "PGRST122",
        `Invalid preferences given with handling=strict`,
        `Invalid preferences: ${item}`,
      );
    }
  }
  return prefer;
}

function parseAccept(value: string | undefined, method: string): MediaType {
  if (!value) return "json";
  // The client's media types, most preferred first (q-values honoured).
  const types = new Negotiator({ headers: { accept: value } }).mediaTypes().map((t) => t.toLowerCase());
  for (const t of types) {
    if (t === "application/vnd.pgrst.object+json" || t === "application/vnd.pgrst.object") return "object";
    if (
      t === "application/json" ||
      t === "*/*" ||
      t === "application/*" ||
      t === "application/vnd.pgrst.array+json"
    )
      return "json";
    if (t === "text/csv") return "csv";
    if (t.startsWith("application/vnd.pgrst.plan")) return "plan";
    if (t === "application/openapi+json" && method === "GET") return "openapi";
    if (t === "application/geo+json") return "geojson";
  }
  throw errors.unacceptableMedia(value);
}

const PLAN_OPTIONS = new Set(["analyze", "verbose", "settings", "buffers", "wal"]);

/** `application/vnd.pgrst.plan+text; for="application/json"; options=analyze|verbose` */
function parsePlanAccept(accept: string): ApiRequest["explain"] {
  const plan = accept
    .split(",")
    .find((t) => t.trim().toLowerCase().startsWith("application/vnd.pgrst.plan"))!;
  const format = /plan\+json/i.test(plan) ? "json" : "text";
  const forType = /for="?([^";]+)"?/i.exec(plan)?.[1] ?? "application/json";
  const options = (/options=([a-z|]+)/i.exec(plan)?.[1] ?? "").split("|").filter((o) => PLAN_OPTIONS.has(o));
  return { format, for: forType, options };
}

function nonNegativeInt(text: string, what: "limit" | "offset"): number {
  if (!/^-?\d+$/.test(text.trim()))
    throw errors.parse(what, text, 1, `unexpected "${text}" expecting an integer`);
  return Number(text);
}

/** Rows have no known count before the query runs: an open range ends at this bound. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

/** `Range: items=0-9` (or `0-9` with `Range-Unit: items`): one range of rows; others are ignored. */
function parseRange(h: HttpInput["headers"]): ApiRequest["range"] {
  const unit = header(h, "range-unit");
  const range = header(h, "range")?.trim();
  if (!range || (unit && unit.toLowerCase() !== "items")) return undefined;
  const spec = range.includes("=") ? range : `items=${range}`;
  // A suffix range (`-5`, the last rows) has no meaning before the rows are counted.
  if (/=\s*-/.test(spec)) return undefined;
  const ranges = parseRangeHeader(UNBOUNDED, spec);
  if (ranges === -1) {
    throw errors.invalidRange(
      "The lower boundary must be lower than or equal to the upper boundary in the Range header.",
    );
  }
  if (ranges === -2 || ranges.type !== "items" || ranges.length !== 1) return undefined;
  const { start, end } = ranges[0];
  return end === UNBOUNDED - 1 ? { offset: start } : { offset: start, limit: end - start + 1 };
}

const ACTIONS: Record<string, Action> = {
  GET: "read",
  HEAD: "head",
  POST: "insert",
  PATCH: "update",
  DELETE: "delete",
};

/** Splits `a.b.order` into the embed path ["a","b"] and the parameter name. */
function scoped(key: string): { path: string[]; name: string } {
  const parts = key.split(".");
  return { path: parts.slice(0, -1), name: parts[parts.length - 1] };
}

function parsePayload(body: Buffer | undefined, contentType: string | undefined): unknown {
  const text = body?.toString("utf8") ?? "";
  if (text.trim() === "") return undefined;
  const type = (contentType ?? "application/json").split(";")[0].trim().toLowerCase();
  if (type === "application/x-www-form-urlencoded") {
    return Object.fromEntries(new URLSearchParams(text));
  }
  if (type === "text/csv") {
    try {
      // The header row names the columns; an empty unquoted field is NULL.
      return parseCsv(text, {
        columns: true,
        skip_empty_lines: true,
        cast: (value, context) => (!context.header && !context.quoting && value === "" ? null : value),
      });
    } catch (e) {
      throw errors.invalidBody(`Invalid CSV: ${(e as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch {
    throw errors.invalidBody("Empty or invalid json");
  }
}

export function parseApiRequest(input: HttpInput, exposedSchemas: string[]): ApiRequest {
  const rpc = /^\/rpc\/([^/]+)$/.exec(input.path);
  const target = decodeURIComponent(rpc ? rpc[1] : input.path.replace(/^\//, ""));
  let action = ACTIONS[input.method];
  if (rpc) action = "call";

  const profileHeader =
    input.method === "GET" || input.method === "HEAD"
      ? header(input.headers, "accept-profile")
      : header(input.headers, "content-profile");
  const schema = profileHeader ?? exposedSchemas[0];
  if (!exposedSchemas.includes(schema)) throw errors.unacceptableSchema(schema, exposedSchemas);

  const req: ApiRequest = {
    action,
    target,
    isRpc: !!rpc,
    schema,
    profileNegotiated: profileHeader !== undefined,
    select: [{ kind: "star" }],
    filters: [],
    logic: [],
    order: [],
    limits: [],
    offsets: [],
    range: input.method === "GET" || input.method === "HEAD" ? parseRange(input.headers) : undefined,
    prefer: parsePrefer(header(input.headers, "prefer")),
    media: parseAccept(header(input.headers, "accept"), input.method),
    rpcArgs: new Map(),
  };
  if (req.media === "plan") req.explain = parsePlanAccept(header(input.headers, "accept")!);

  for (const [key, value] of input.query) {
    if (key === "apikey") continue;
    if (key === "select") req.select = parseSelect(value);
    else if (key === "columns") req.columns = parseColumnList(value);
    else if (key === "on_conflict") req.onConflict = parseColumnList(value);
    else {
      const { path, name } = scoped(key);
      if (name === "order") req.order.push({ path, value: parseOrder(value) });
      else if (name === "limit") req.limits.push({ path, value: nonNegativeInt(value, "limit") });
      else if (name === "offset") req.offsets.push({ path, value: nonNegativeInt(value, "offset") });
      else if (name === "or" || name === "and") {
        const negated = path[path.length - 1] === "not";
        const realPath = negated ? path.slice(0, -1) : path;
        req.logic.push({ path: realPath, value: parseLogicTree(name, negated, value, value) });
      } else if (
        rpc &&
        path.length === 0 &&
        !/^[a-z]+\(?.*\.|^not\./.test(value) &&
        (input.method === "GET" || input.method === "HEAD")
      ) {
        req.rpcArgs.set(key, value);
      } else {
        req.filters.push({ path, value: parseFilterValue(parseField(name, "filter"), value, value) });
      }
    }
  }

  if (input.method === "POST" || input.method === "PATCH" || (rpc && input.method === "POST")) {
    req.payload = parsePayload(input.body, header(input.headers, "content-type"));
  }
  return req;
}
