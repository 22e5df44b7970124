import type pg from "pg";
import { allRows } from "../rows";

/** Usage counters (`platform.api_usage`, counted by the HTTP layer) and invocation stats (`platform.function_logs`). */

/** A time range back from now (an interval literal) cut into buckets (a `date_trunc` unit). */
export interface Window {
  span: string;
  bucket: string;
}

/** Requests per service and bucket of the window. */
export async function requestCounts(pool: pg.Pool, ref: string, window: Window) {
  return allRows<Record<string, unknown>>(
    pool,
    `select date_trunc($3, minute) as timestamp,
            coalesce(sum(requests) filter (where service = 'auth'), 0)::int as total_auth_requests,
            coalesce(sum(requests) filter (where service = 'realtime'), 0)::int as total_realtime_requests,
            coalesce(sum(requests) filter (where service = 'rest'), 0)::int as total_rest_requests,
            coalesce(sum(requests) filter (where service = 'storage'), 0)::int as total_storage_requests
       from platform.api_usage where project_ref = $1 and minute > now() - $2::interval
      group by 1 order by 1`,
    [ref, window.span, window.bucket],
  );
}

/** Invocations of one function per bucket of the window: status classes and execution time. */
export async function invocationStats(pool: pg.Pool, ref: string, functionId: string, window: Window) {
  return allRows<Record<string, unknown>>(
    pool,
    `select date_trunc($4, created_at) as timestamp,
            count(*)::int as requests_count,
            count(*) filter (where status between 200 and 299)::int as success_count,
            count(*) filter (where status between 300 and 399)::int as redirect_count,
            count(*) filter (where status between 400 and 499)::int as client_err_count,
            count(*) filter (where status >= 500)::int as server_err_count,
            coalesce(avg(duration_ms), 0)::float8 as avg_execution_time,
            coalesce(max(duration_ms), 0)::int as max_execution_time
       from platform.function_logs
      where project_ref = $1 and function_id = $2 and kind = 'invocation' and created_at > now() - $3::interval
      group by 1 order by 1`,
    [ref, functionId, window.span, window.bucket],
  );
}

/** The requests of the last 24 hours, as one row `{count}`. */
export async function requestsOfLastDay(pool: pg.Pool, ref: string): Promise<{ count: number }[]> {
  return allRows(
    pool,
    "select coalesce(sum(requests), 0)::int as count from platform.api_usage where project_ref = $1 and minute > now() - interval '1 day'",
    [ref],
  );
}
