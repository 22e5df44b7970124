import type { PgClient, PgClientQuery, PgClientResult, WithPgClient } from "@dataplan/pg";
import type pg from "pg";
import type { PgGqlTransactionOptions, WithPgTransaction } from "../../plugins/PgGqlTransactionPlugin";
import {
  queryInOneRoundTrip,
  withPipelinedTransaction,
  type PipelinedTransaction,
  type TransactionScope,
} from "../db/transaction";

/**
 * grafast's database clients for one GraphQL request (its context's `withPgClient`), over Strata's pipelines:
 * PgGqlTransactionPlugin decides the request's transaction, these carry it out. A statement on its own is a
 * read in one round trip (settings and statement as one implicit read-only transaction); the request's
 * transaction (`withPgTransaction`) sends BEGIN and the settings with its first statement and a nested
 * transaction as a savepoint that travels with the next statement.
 */

/** grafast's `query` over a runner of statements: its text, values and array mode in, rows and count out. */
function grafastQuery(
  run: (
    statement: { text: string; values: readonly unknown[] },
    rowMode: "array" | undefined,
  ) => Promise<pg.QueryResult>,
): PgClient["query"] {
  return async <TData>(q: PgClientQuery): Promise<PgClientResult<TData>> => {
    const { rows, rowCount } = await run(
      { text: q.text, values: q.values ?? [] },
      q.arrayMode ? "array" : undefined,
    );
    return { rows: rows as TData[], rowCount };
  };
}

/** The client of a PipelinedTransaction: nested transactions one after the other, as savepoints. */
function clientInTransaction(tx: PipelinedTransaction, markSent: () => void): PgClient {
  let savepoints = 0;
  let queue: Promise<unknown> = Promise.resolve();
  const client: PgClient = {
    query: grafastQuery((statement, rowMode) => {
      markSent();
      return tx.query(statement, rowMode);
    }),
    withTransaction<T>(callback: (client: PgClient) => Promise<T>): Promise<T> {
      const run = async () => {
        const name = `strata_tx${++savepoints}`;
        tx.savepoint(name);
        try {
          const result = await callback(client);
          tx.release(name);
          return result;
        } catch (e) {
          await tx.rollbackTo(name);
          throw e;
        }
      };
      const result = queue.then(run, run);
      queue = result.catch(() => undefined);
      return result;
    },
  };
  return client;
}

/** A request's `withPgClient`, which tells whether a statement was sent (the scope's schema check with it). */
export type RequestPgClients = WithPgClient & WithPgTransaction & { sentStatement: boolean };

/**
 * The `withPgClient` of a request for `scope` (its role, claims and settings; grafast's `pgSettings` are the
 * same role and claims, so they are not applied again).
 */
export function requestPgClients(pool: pg.Pool, scope: TransactionScope): RequestPgClients {
  const readScope = { ...scope, readOnly: true };
  const markSent = () => (withPgClient.sentStatement = true);
  const inTransaction = <T>(txScope: TransactionScope, callback: (client: PgClient) => Promise<T>) =>
    withPipelinedTransaction(pool, txScope, (tx) => callback(clientInTransaction(tx, markSent)));
  const client: PgClient = {
    query: grafastQuery((statement, rowMode) => {
      markSent();
      return queryInOneRoundTrip(pool, readScope, statement, rowMode);
    }),
    // The rare step that asks for a transaction of its own outside the request's gets a read-only one.
    withTransaction: (callback) => inTransaction(readScope, callback as (client: PgClient) => Promise<never>),
  };
  const withPgClient = (async (_pgSettings, callback) => callback(client)) as RequestPgClients;
  withPgClient.sentStatement = false;
  withPgClient.withPgTransaction = (_pgSettings, options: PgGqlTransactionOptions, callback) =>
    inTransaction({ ...scope, readOnly: options.readOnly, snapshot: options.snapshot }, callback);
  return withPgClient;
}
