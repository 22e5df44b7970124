import { sql } from "pg-sql2";
import type { DataApiConfig } from "../catalog/dataApiConfig";
import type { SchemaCache } from "../catalog/schemaCache";
import { planRequest, type Plan } from "./plan";
import { parseApiRequest, type ApiRequest, type HttpInput } from "./request/apiRequest";
import { statementOf, writePayloadOf } from "./sql/statements";

/**
 * A request parsed (request/), planned (plan.ts) and its statement compiled (sql/): what the REST route runs.
 * A read (GET, HEAD) is made once per identical request and kept — the same URL and the same headers the
 * parse reads give the same plan and statement, whoever asks (the role only decides, at run time, what the
 * statement may see) — per schema cache and configuration, so a schema or configuration change starts over.
 * A write is parsed and planned every time (its payload decides its columns and may be refused), and its
 * statement kept by the same inputs and the columns it writes: a request that writes the same columns binds
 * its own payload in the kept statement instead of compiling it again.
 */
export interface PlannedRequest {
  apiReq: ApiRequest;
  plan: Plan;
  statement: { text: string; values: readonly unknown[] } | null;
}

/**
 * The headers a parse reads (apiRequest.ts) that shape the plan: with the method, path and query, a read's
 * whole input, and a write's but for its payload (the body and its Content-Type).
 */
const PLAN_HEADERS = [
  "accept",
  "accept-profile",
  "content-profile",
  "prefer",
  "range",
  "range-unit",
] as const;
/** Reads kept per schema cache and configuration at most; a burst of distinct reads starts the memo over. */
const MAX_KEPT = 1000;

/** A write's compiled statement, its payload's parameter at `payloadAt` (-1: a delete binds none). */
interface KeptWrite {
  text: string;
  values: readonly unknown[];
  payloadAt: number;
}

/** What is kept per schema cache and configuration: whole reads, and writes' statements. */
interface Kept {
  reads: Map<string, PlannedRequest>;
  writes: Map<string, KeptWrite | null>;
}

const kept = new WeakMap<SchemaCache, WeakMap<DataApiConfig, Kept>>();

function requestKey(input: HttpInput, rawQuery: string): string {
  let key = `${input.method}\u0000${input.path}\u0000${rawQuery}`;
  for (const name of PLAN_HEADERS) {
    const value = input.headers[name];
    key += `\u0000${Array.isArray(value) ? value.join(", ") : (value ?? "\u0001")}`;
  }
  return key;
}

function keptOf(cache: SchemaCache, config: DataApiConfig): Kept {
  let byConfig = kept.get(cache);
  if (!byConfig) kept.set(cache, (byConfig = new WeakMap()));
  let memo = byConfig.get(config);
  if (!memo) byConfig.set(config, (memo = { reads: new Map(), writes: new Map() }));
  return memo;
}

/** Keeps `value` under `key`, starting the memo over when it is full. */
function keep<V>(memo: Map<string, V>, key: string, value: V): void {
  if (memo.size >= MAX_KEPT) memo.clear();
  memo.set(key, value);
}

function compiled(plan: Plan): PlannedRequest["statement"] {
  const statement = statementOf(plan);
  return statement ? sql.compile(statement) : null;
}

function planned(input: HttpInput, cache: SchemaCache, config: DataApiConfig): PlannedRequest {
  const apiReq = parseApiRequest(input, config.schemas);
  const plan = planRequest(cache, apiReq, config);
  return { apiReq, plan, statement: compiled(plan) };
}

/**
 * A write's statement as kept: its payload's parameter found by value, which must be the only one equal to it
 * (else, null: its statement is compiled every time).
 */
function keptWrite(
  statement: { text: string; values: readonly unknown[] },
  json: string | null,
): KeptWrite | null {
  if (json === null) return { ...statement, payloadAt: -1 };
  const at = statement.values.indexOf(json);
  if (at === -1 || statement.values.indexOf(json, at + 1) !== -1) return null;
  return { ...statement, payloadAt: at };
}

/** A write parsed and planned, its statement the kept one with this request's payload bound when there is one. */
function plannedWrite(
  input: HttpInput,
  rawQuery: string,
  cache: SchemaCache,
  config: DataApiConfig,
): PlannedRequest {
  const apiReq = parseApiRequest(input, config.schemas);
  const plan = planRequest(cache, apiReq, config);
  const payload = writePayloadOf(plan);
  if (payload === undefined) return { apiReq, plan, statement: compiled(plan) };
  const { writes } = keptOf(cache, config);
  const key = `${requestKey(input, rawQuery)}\u0000${payload.columns.join("\u0000")}`;
  const write = writes.get(key);
  if (write === undefined) {
    const statement = compiled(plan)!;
    keep(writes, key, keptWrite(statement, payload.json));
    return { apiReq, plan, statement };
  }
  if (write === null) return { apiReq, plan, statement: compiled(plan) };
  if (write.payloadAt === -1) return { apiReq, plan, statement: write };
  const values = write.values.slice();
  values[write.payloadAt] = payload.json;
  return { apiReq, plan, statement: { text: write.text, values } };
}

/**
 * The request parsed, planned and compiled; a read that came before is answered from the memo, a write that
 * came before with the same columns takes its statement from it. A request that fails to parse or plan
 * throws each time (its error is never kept).
 */
export function plannedRequest(
  input: HttpInput,
  rawQuery: string,
  cache: SchemaCache,
  config: DataApiConfig,
): PlannedRequest {
  if (input.method !== "GET" && input.method !== "HEAD") return plannedWrite(input, rawQuery, cache, config);
  const { reads } = keptOf(cache, config);
  const key = requestKey(input, rawQuery);
  let read = reads.get(key);
  if (read === undefined) {
    read = planned(input, cache, config);
    keep(reads, key, read);
  }
  return read;
}
