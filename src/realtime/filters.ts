import { createHash } from "node:crypto";

/**
 * A postgres_changes binding as the client sends it in its join (`{event, schema, table, filter}`), parsed:
 * the platform's filter grammar `column=op.value` with op one of eq, neq, lt, lte, gt, gte, in.
 */

export type ChangeEvent = "*" | "INSERT" | "UPDATE" | "DELETE";
export type FilterOp = "eq" | "neq" | "lt" | "lte" | "gt" | "gte" | "in";

export interface Filter {
  column: string;
  op: FilterOp;
  /** One operand, or the list of `in.(a,b)`. */
  values: string[];
}

export interface PgBinding {
  /** The id the join reply gives this binding and every change message carries in `ids`. */
  id: number;
  event: ChangeEvent;
  schema: string;
  table?: string;
  filter?: Filter;
  /** The binding as the client sent it, echoed in the join reply. */
  echo: Record<string, string>;
}

const EVENTS = new Set(["*", "INSERT", "UPDATE", "DELETE"]);
const FILTER = /^([^=]+)=(eq|neq|lt|lte|gt|gte|in)\.(.*)$/s;

/** Parses one binding; a string is the reason it is refused. */
export function parseBinding(raw: unknown): PgBinding | string {
  if (!raw || typeof raw !== "object") return "a postgres_changes binding must be an object";
  const r = raw as Record<string, unknown>;
  const event = typeof r.event === "string" ? r.event.toUpperCase() : "";
  if (!EVENTS.has(event)) return `event must be one of *, INSERT, UPDATE, DELETE (got ${String(r.event)})`;
  if (typeof r.schema !== "string" || r.schema === "") return "schema is required";
  if (r.table !== undefined && r.table !== null && typeof r.table !== "string")
    return "table must be a string";
  const echo: Record<string, string> = { event: r.event as string, schema: r.schema };
  const table = typeof r.table === "string" && r.table !== "" && r.table !== "*" ? r.table : undefined;
  if (typeof r.table === "string") echo.table = r.table;
  let filter: Filter | undefined;
  if (r.filter !== undefined && r.filter !== null && r.filter !== "") {
    if (typeof r.filter !== "string") return "filter must be a string";
    const m = FILTER.exec(r.filter);
    if (!m) return `Error parsing \`filter\` params: ${r.filter}`;
    const op = m[2] as FilterOp;
    let values = [m[3]];
    if (op === "in") {
      const list = /^\((.*)\)$/s.exec(m[3]);
      if (!list) return `Error parsing \`filter\` params: ${r.filter}`;
      values = list[1].split(",").map((v) => v.trim().replace(/^"(.*)"$/s, "$1"));
    }
    filter = { column: m[1], op, values };
    echo.filter = r.filter;
  }
  const id = createHash("sha1")
    .update(JSON.stringify([event, r.schema, table ?? null, r.filter ?? null]))
    .digest()
    .readUInt32BE(0);
  return { id: id >>> 5, event: event as ChangeEvent, schema: r.schema, table, filter, echo };
}

function compare(value: unknown, operand: string): number {
  if (typeof value === "number" && operand.trim() !== "" && Number.isFinite(Number(operand))) {
    return value - Number(operand);
  }
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text < operand ? -1 : text > operand ? 1 : 0;
}

/** Whether a record passes a filter; a column the record lacks (a delete's key-only row) does not filter. */
function passes(filter: Filter, record: Record<string, unknown>): boolean {
  if (!(filter.column in record)) return true;
  const value = record[filter.column];
  if (value === null || value === undefined) return false;
  switch (filter.op) {
    case "eq":
      return compare(value, filter.values[0]) === 0;
    case "neq":
      return compare(value, filter.values[0]) !== 0;
    case "lt":
      return compare(value, filter.values[0]) < 0;
    case "lte":
      return compare(value, filter.values[0]) <= 0;
    case "gt":
      return compare(value, filter.values[0]) > 0;
    case "gte":
      return compare(value, filter.values[0]) >= 0;
    case "in":
      return filter.values.some((v) => compare(value, v) === 0);
  }
}

/** Whether a change of `schema.table` of kind `type` matches a binding (filter aside). */
function bindingMatches(b: PgBinding, schema: string, table: string, type: string): boolean {
  return (
    (b.schema === "*" || b.schema === schema) &&
    (b.table === undefined || b.table === table) &&
    (b.event === "*" || b.event === type)
  );
}

/** The ids of the bindings a change of `schema.table` of kind `type` with `row` matches (each once), if any. */
export function matchingIds(
  bindings: PgBinding[],
  schema: string,
  table: string,
  type: string,
  row: Record<string, unknown>,
): number[] | undefined {
  let ids: number[] | undefined;
  for (const b of bindings) {
    if (!bindingMatches(b, schema, table, type) || (b.filter && !passes(b.filter, row))) continue;
    if (!ids) ids = [b.id];
    else if (!ids.includes(b.id)) ids.push(b.id);
  }
  return ids;
}
