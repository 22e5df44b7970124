import type pg from "pg";
import { oneOffClient } from "../db/client";
import { ensureLoginPassword } from "../db/loginRoles";
import { withCredentials } from "../db/urls";
import type { KeyEncryptionKey } from "../platform/kek";

const MAX_ROWS = 1000;
/** The role log queries log in as (sql/platform/901_logs.sql, 930_log_reader_login.sql). */
export const LOG_READER = "strata_log_reader";

export interface LogQuery {
  ref: string;
  sql: string;
  start: Date;
  end: Date;
}

/** Where the reader logs in (the control database, superuser URL) and the key its password derives from. */
export interface LogReaderAccess {
  controlUrl: string;
  kek: KeyEncryptionKey;
}

/** The reader's password: derived from the key-encryption key, so every node agrees and nothing stores it. */
export const logReaderPassword = (kek: KeyEncryptionKey): string => kek.derivedSecret(LOG_READER);

/**
 * The reader session's settings, sent in the connection's startup message, so they hold before its first
 * statement: the views' scope (they read `strata.log_*` with current_setting), read-only, 5 s, the log
 * sources as search_path. Nothing the query can do changes them: set_config is not granted to the reader,
 * and SET cannot appear inside a query.
 */
function sessionOptions(q: LogQuery): string {
  // Option values are split at white space: the ref's and ISO timestamps' characters have none.
  if (!/^[a-z]{20}$/.test(q.ref)) throw new Error(`not a project ref: ${q.ref}`);
  const settings = {
    "strata.log_ref": q.ref,
    "strata.log_start": q.start.toISOString(),
    "strata.log_end": q.end.toISOString(),
    default_transaction_read_only: "on",
    statement_timeout: "5s",
    search_path: "logs",
  };
  return Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(" ");
}

/**
 * A connection of the reader for one query. The role is cluster-wide: a refused password (another
 * installation on the cluster, a key rotation, the first query ever) is set to this installation's once.
 */
async function connectAsReader(access: LogReaderAccess, q: LogQuery): Promise<pg.Client> {
  const password = logReaderPassword(access.kek);
  const config = {
    connectionString: withCredentials(access.controlUrl, LOG_READER, password),
    options: sessionOptions(q),
  };
  const connect = async () => {
    const client = oneOffClient(config);
    try {
      await client.connect();
      return client;
    } catch (e) {
      await client.end().catch(() => {});
      throw e;
    }
  };
  try {
    return await connect();
  } catch (e) {
    if ((e as { code?: string }).code !== "28P01") throw e;
    await ensureLoginPassword(access.controlUrl, LOG_READER, password);
    return connect();
  }
}

/**
 * Runs a caller's SQL over one project's log sources (the views of schema `logs`: edge_logs, function_logs,
 * function_edge_logs, auth_logs, postgres_logs) on a connection of its own that logs in as
 * `strata_log_reader`, which may read those views and nothing else, create nothing and connect nowhere but
 * here; Strata's superuser connection never sees the text. One statement by construction: it travels in the
 * extended protocol (the row limit is bound as $1), whose Parse refuses a second statement, and the text sits
 * inside a query, so it can only be a query. The connection is closed afterwards, so nothing it could leave on
 * a session outlives it. Answers the rows, or the error for a statement the database refused.
 */
export async function queryLogs(
  access: LogReaderAccess,
  q: LogQuery,
): Promise<{ rows: unknown[] } | { error: string }> {
  const body = q.sql.replace(/[;\s]+$/, "");
  const client = await connectAsReader(access, q);
  try {
    const { rows } = await client.query(`select * from (\n${body}\n) as result limit $1`, [MAX_ROWS]);
    return { rows };
  } catch (e) {
    const { code, message } = e as { code?: string; message: string };
    // Refusals of the caller's SQL are theirs: syntax, unknown source or column, permission, data, timeout, a
    // read-only transaction, an unsupported feature, a limit, or a parameter of theirs the bind does not give.
    if (code && /^(0A|21|22|25|42|54|57014|08P01)/.test(code)) return { error: message };
    throw e;
  } finally {
    await client.end().catch(() => {});
  }
}
