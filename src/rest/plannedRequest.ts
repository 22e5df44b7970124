import { sql } from "pg-sql2";
import type { DataApiConfig } from "../catalog/dataApiConfig";
import type { SchemaCache } from "../catalog/schemaCache";
import { planRequest, type Plan } from "./plan";
import { parseApiRequest, type ApiRequest, type HttpInput } from "./request/apiRequest";
import { statementOf } from "./sql/statements";

/**
 * A request parsed (request/), planned (plan.ts) and its statement compiled (sql/): what the REST route runs.
 * A read (GET, HEAD) is made once per identical request and kept — the same URL and the same headers the
 * parse reads give the same plan and statement, whoever asks (the role only decides, at run time, what the
 * statement may see) — per schema cache and configuration, so a schema or configuration change starts over.
 */
export interface PlannedRequest {
  apiReq: ApiRequest;
  plan: Plan;
  statement: { text: string; values: readonly unknown[] } | null;
}

/** The headers a read's parse reads (apiRequest.ts): with the method, path and query, a read's whole input. */
const READ_HEADERS = ["accept", "accept-profile", "prefer", "range", "range-unit"] as const;
/** Reads kept per schema cache and configuration at most; a burst of distinct reads starts the memo over. */
const MAX_KEPT = 1000;

const keptReads = new WeakMap<SchemaCache, WeakMap<DataApiConfig, Map<string, PlannedRequest>>>();

function readKey(input: HttpInput, rawQuery: string): string {
  let key = `${input.method}\u0000${input.path}\u0000${rawQuery}`;
  for (const name of READ_HEADERS) {
    const value = input.headers[name];
    key += `\u0000${Array.isArray(value) ? value.join(", ") : (value ?? "\u0001")}`;
  }
  return key;
}

function readsOf(cache: SchemaCache, config: DataApiConfig): Map<string, PlannedRequest> {
  let byConfig = keptReads.get(cache);
  if (!byConfig) keptReads.set(cache, (byConfig = new WeakMap()));
  let reads = byConfig.get(config);
  if (!reads) byConfig.set(config, (reads = new Map()));
  return reads;
}

function planned(input: HttpInput, cache: SchemaCache, config: DataApiConfig): PlannedRequest {
  const apiReq = parseApiRequest(input, config.schemas);
  const plan = planRequest(cache, apiReq, config);
  const statement = statementOf(plan);
  return { apiReq, plan, statement: statement ? sql.compile(statement) : null };
}

/**
 * The request parsed, planned and compiled; a read that came before is answered from the memo. A request that
 * fails to parse or plan throws each time (its error is never kept).
 */
export function plannedRequest(
  input: HttpInput,
  rawQuery: string,
  cache: SchemaCache,
  config: DataApiConfig,
): PlannedRequest {
  if (input.method !== "GET" && input.method !== "HEAD") return planned(input, cache, config);
  const reads = readsOf(cache, config);
  const key = readKey(input, rawQuery);
  let read = reads.get(key);
  if (read === undefined) {
    read = planned(input, cache, config);
    if (reads.size >= MAX_KEPT) reads.clear();
    reads.set(key, read);
  }
  return read;
}
