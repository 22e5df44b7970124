import type { PgClient, PgClientQuery, PgClientResult, WithPgClient } from "@dataplan/pg";
import { makeWithPgClientViaPgClientAlreadyInTransaction } from "@dataplan/pg/adaptors/pg";
import type pg from "pg";
import { prepareValue } from "pg/lib/utils";
import { replacePlaceholders } from "../../plugins/sqlPlaceholders";
import type { RequestAuth } from "../auth/dataAuth";
import type { ProjectRuntime } from "../projects/runtime";

export interface DataTransactionOptions {
  readOnly?: boolean;
  /** `array`: rows as arrays of column values, in the statement's column order. */
  rowMode?: "array";
  /** Further `set_config(name, value, true)` settings, e.g. request.method or search_path. */
  settings?: Record<string, string>;
}

/** `begin; select set_config(...)` for the request's role, claims and settings, values escaped by pg. */
function transactionPrefix(
  client: pg.PoolClient,
  auth: RequestAuth,
  options: DataTransactionOptions,
): string {
  const settings: Record<string, string> = {
    ...options.settings,
    role: auth.role,
    "request.jwt.claims": JSON.stringify(auth.claims),
  };
  const configs = Object.entries(settings).map(
    ([name, value]) => `set_config(${client.escapeLiteral(name)}, ${client.escapeLiteral(value)}, true)`,
  );
  return `${options.readOnly ? "begin read only" : "begin"}; select ${configs.join(", ")}`;
}

/**
 * Runs `work` in one transaction on the project's authenticator pool with the request's role and claims set
 * locally (`set_config(..., true)`), so grants and row level security decide. Commits when `work` resolves,
 * rolls back when it throws.
 */
export async function withDataTransaction<T>(
  project: ProjectRuntime,
  auth: RequestAuth,
  work: (client: pg.PoolClient) => Promise<T>,
  options: DataTransactionOptions = {},
): Promise<T> {
  const client = await project.dataPool.connect();
  let healthy = true;
  try {
    // One round trip for BEGIN and the settings.
    await client.query(transactionPrefix(client, auth, options));
    const result = await work(client);
    await client.query("commit");
    return result;
  } catch (e) {
    await client.query("rollback").catch(() => {
      healthy = false;
    });
    throw e;
  } finally {
    client.release(healthy ? undefined : true);
  }
}

/** A parameter as an SQL literal: the text pg itself would send for it, escaped. */
function literalOf(client: pg.PoolClient, value: unknown): string {
  const prepared = prepareValue(value);
  if (prepared === null || prepared === undefined) return "null";
  return client.escapeLiteral(Buffer.isBuffer(prepared) ? `\\x${prepared.toString("hex")}` : prepared);
}

/**
 * Replaces the `$n` placeholders of a compiled statement by escaped literals, skipping quoted identifiers
 * and string literals, so the statement can travel in a simple-protocol message.
 */
export function inlineValues(client: pg.PoolClient, text: string, values: readonly unknown[]): string {
  return replacePlaceholders(text, (n) => literalOf(client, values[n - 1]));
}

/**
 * A read in a single network round trip: BEGIN, the request settings, the statement and COMMIT travel as
 * one simple-protocol message. Answers the statement's result.
 */
export async function queryInOneRoundTrip(
  project: ProjectRuntime,
  auth: RequestAuth,
  statement: { text: string; values: readonly unknown[] },
  options: DataTransactionOptions = {},
): Promise<pg.QueryResult> {
  const client = await project.dataPool.connect();
  let healthy = true;
  try {
    const message = `${transactionPrefix(client, auth, options)}; ${inlineValues(client, statement.text, statement.values)}; commit`;
    const results = (await (options.rowMode === "array"
      ? client.query({ text: message, rowMode: "array" })
      : client.query(message))) as unknown as pg.QueryResult[];
    return results[results.length - 2];
  } catch (e) {
    // The failed statement left the transaction aborted: end it before the connection goes back to the pool.
    await client.query("rollback").catch(() => {
      healthy = false;
    });
    throw e;
  } finally {
    client.release(healthy ? undefined : true);
  }
}

/**
 * Reads for grafast in one network round trip each: every statement travels with BEGIN READ ONLY, the
 * request's role and claims, and COMMIT (queryInOneRoundTrip). Grafast runs one statement per call;
 * the rare caller that asks for a transaction of its own gets a real one.
 */
export function withReadsInOneRoundTrip(
  project: ProjectRuntime,
  auth: RequestAuth,
  settings: Record<string, string> = {},
): WithPgClient {
  const client: PgClient = {
    async query<TData>(q: PgClientQuery): Promise<PgClientResult<TData>> {
      const { rows, rowCount } = await queryInOneRoundTrip(
        project,
        auth,
        { text: q.text, values: q.values ?? [] },
        { readOnly: true, rowMode: q.arrayMode ? "array" : undefined, settings },
      );
      return { rows: rows as TData[], rowCount };
    },
    withTransaction: (callback) =>
      withDataTransaction(
        project,
        auth,
        (pgClient) =>
          makeWithPgClientViaPgClientAlreadyInTransaction(pgClient, true)(null, callback as never),
        { readOnly: true, settings },
      ),
  };
  return async (_pgSettings, callback) => callback(client);
}
