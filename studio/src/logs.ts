import { mgmt } from "./api";
import type { Row } from "./components/DataGrid";

/** The time ranges of the log pages. */
export const RANGES: [label: string, minutes: number][] = [
  ["Last 15 minutes", 15],
  ["Last hour", 60],
  ["Last 24 hours", 24 * 60],
];

/** A log timestamp (microseconds since the epoch, or an ISO string) in milliseconds. */
function millisOf(value: unknown): number {
  if (typeof value === "number") return value > 1e14 ? value / 1000 : value;
  return Date.parse(String(value));
}

/** Runs `sql` over the project's log sources for the `minutes` before `at` (Management API logs endpoint). */
export async function queryLogs(ref: string, sql: string, minutes: number, at: number): Promise<Row[]> {
  const params = new URLSearchParams({
    sql,
    iso_timestamp_start: new Date(at - minutes * 60_000).toISOString(),
    iso_timestamp_end: new Date(at).toISOString(),
  });
  const r = await mgmt.get<{ result: Row[] }>(`/v1/projects/${ref}/analytics/endpoints/logs?${params}`);
  return r.result.map((row) => ({
    ...row,
    timestamp: row.timestamp === undefined ? undefined : new Date(millisOf(row.timestamp)).toISOString(),
  }));
}
