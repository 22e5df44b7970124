import { oneOffClient } from "../db/client";
import { withAdminTransaction } from "../db/transaction";

const MAX_ROWS = 1000;

export interface LogQuery {
  ref: string;
  sql: string;
  start: Date;
  end: Date;
}

/**
 * Runs a caller's SQL over one project's log sources (the views of schema `logs`: edge_logs,
 * function_logs, function_edge_logs, auth_logs, postgres_logs) in a read-only transaction as `strata_log_reader`, which may read nothing else. The
 * statement is wrapped as a subquery, so it can only be one query (no utility statement, no second
 * statement); the views' scope is set before it, and the reader cannot change settings (set_config is not
 * granted to it). It runs on a connection of its own, closed afterwards, so nothing it could leave on a
 * session (an advisory lock) outlives it. Answers the rows, or the error for a statement the database
 * refused.
 */
export async function queryLogs(
  controlUrl: string,
  q: LogQuery,
): Promise<{ rows: unknown[] } | { error: string }> {
  const body = q.sql.replace(/[;\s]+$/, "");
  const client = oneOffClient({ connectionString: controlUrl });
  await client.connect();
  try {
    return await withAdminTransaction(client, async () => {
      await client.query("set transaction read only");
      await client.query(
        `select set_config('strata.log_ref', $1, true), set_config('strata.log_start', $2, true),
                set_config('strata.log_end', $3, true), set_config('statement_timeout', '5s', true),
                set_config('search_path', 'logs', true), set_config('role', 'strata_log_reader', true)`,
        [q.ref, q.start.toISOString(), q.end.toISOString()],
      );
      const { rows } = await client.query(`select * from (\n${body}\n) as result limit ${MAX_ROWS}`);
      return { rows };
    });
  } catch (e) {
    const { code, message } = e as { code?: string; message: string };
    // Refusals of the caller's SQL (syntax, unknown source or column, permission, timeout) are theirs.
    if (code && /^(42|22|57014|25)/.test(code)) return { error: message };
    throw e;
  } finally {
    await client.end().catch(() => {});
  }
}
