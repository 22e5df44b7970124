import type { PgClient, PgClientQuery, PgClientResult, WithPgClient } from "@dataplan/pg";
import { makeWithPgClientViaPgClientAlreadyInTransaction } from "@dataplan/pg/adaptors/pg";
import pg from "pg";
import { prepareValue } from "pg/lib/utils";
import { replacePlaceholders } from "./placeholders";

/**
 * Every transaction of Strata starts here: `withTransaction` for work under a role and its claims (data
 * requests), `withAdminTransaction` for the platform's own work as the connection's user. One treatment of
 * a failed rollback for all: the work's error is what the caller sees, and a pooled connection whose
 * rollback failed is destroyed instead of going back to the pool.
 */

/** Who a transaction runs as and what it may read of its caller: set locally, so grants and RLS decide. */
export interface TransactionScope {
  role: string;
  /** `request.jwt.claims`, read by RLS policies. */
  claims: Record<string, unknown>;
  /** Further `set_config(name, value, true)` settings, e.g. request.method or search_path. */
  settings?: Record<string, string>;
  readOnly?: boolean;
}

/** Connections whose rollback failed: their session state is unknown, so the pool must not hand them out. */
const broken = new WeakSet<pg.ClientBase>();

async function rollback(client: pg.ClientBase): Promise<void> {
  await client.query("rollback").catch(() => broken.add(client));
}

/** Runs `work` between `begin` and `commit`; any error rolls back and is rethrown. */
async function transact<C extends pg.ClientBase, T>(
  client: C,
  begin: string,
  work: (client: C) => Promise<T>,
): Promise<T> {
  try {
    await client.query(begin);
    const result = await work(client);
    await client.query("commit");
    return result;
  } catch (e) {
    await rollback(client);
    throw e;
  }
}

/**
 * No connection of the pool came free within its wait (`connectionTimeoutMillis`): every connection is busy.
 * Carries PostgreSQL's SQLSTATE for exhausted resources, so each API answers it as "unavailable", not a 500.
 */
export class PoolTimeout extends Error {
  readonly code = "53300";
  constructor() {
    super("Timed out acquiring a connection from the connection pool: every connection is busy, try again");
  }
}

/** pg-pool's own timeout error (from any caller of `pool.connect()`) as a PoolTimeout; other errors as they are. */
export function asPoolTimeout(e: unknown): unknown {
  return e instanceof Error && /timeout exceeded when trying to connect/.test(e.message)
    ? new PoolTimeout()
    : e;
}

/** Lends a pooled client to `use`, destroying it afterwards when a rollback on it failed. */
async function withPooledClient<T>(pool: pg.Pool, use: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect().catch((e: Error) => {
    throw asPoolTimeout(e);
  });
  try {
    return await use(client);
  } finally {
    client.release(broken.has(client) || undefined);
  }
}

/** `begin; select set_config(...)` for the scope's role, claims and settings: one round trip. */
function beginStatement(client: pg.ClientBase, scope: TransactionScope): string {
  const settings: Record<string, string> = {
    ...scope.settings,
    role: scope.role,
    "request.jwt.claims": JSON.stringify(scope.claims),
  };
  const configs = Object.entries(settings).map(
    ([name, value]) => `set_config(${literalOf(client, name)}, ${literalOf(client, value)}, true)`,
  );
  return `${scope.readOnly ? "begin read only" : "begin"}; select ${configs.join(", ")}`;
}

/**
 * Runs `work` in one transaction on a client of `pool` with the scope's role, claims and settings set locally
 * (`set_config(..., true)`). Commits when `work` resolves, rolls back when it throws.
 */
export function withTransaction<T>(
  pool: pg.Pool,
  scope: TransactionScope,
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  return withPooledClient(pool, (client) => transact(client, beginStatement(client, scope), work));
}

/**
 * Runs `work` in one transaction as the connection's own user: on a client of `db` when it is a pool, or on
 * the client the caller already holds (whose session stays the caller's to release).
 */
export function withAdminTransaction<T>(db: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T>;
export function withAdminTransaction<C extends pg.ClientBase, T>(
  db: C,
  work: (client: C) => Promise<T>,
): Promise<T>;
export function withAdminTransaction<T>(
  db: pg.Pool | pg.ClientBase,
  work: (client: never) => Promise<T>,
): Promise<T> {
  // The overloads pair a pool with pooled clients and a held client with itself.
  const onClient = work as (client: pg.ClientBase) => Promise<T>;
  return db instanceof pg.Pool
    ? withPooledClient(db, (client) => transact(client, "begin", onClient))
    : transact(db, "begin", onClient);
}

/** A text value holding a NUL byte, which PostgreSQL text cannot hold: its own SQLSTATE and message. */
export class NulInText extends Error {
  readonly code = "22021";
  constructor() {
    super('invalid byte sequence for encoding "UTF8": 0x00');
  }
}

/**
 * A value as an SQL literal, for the messages that travel in the simple protocol (which binds no
 * parameters): the text pg itself would send for it, quoted by pg's own `escapeLiteral`. The one place
 * Strata writes a literal into SQL text.
 */
function literalOf(client: pg.ClientBase, value: unknown): string {
  const prepared = prepareValue(value);
  if (prepared === null || prepared === undefined) return "null";
  // A NUL would end the simple-protocol message early: refused as PostgreSQL refuses it in a bound value.
  if (typeof prepared === "string" && prepared.includes("\u0000")) throw new NulInText();
  return client.escapeLiteral(Buffer.isBuffer(prepared) ? `\\x${prepared.toString("hex")}` : prepared);
}

/**
 * Replaces the `$n` placeholders of a compiled statement by escaped literals, skipping quoted identifiers
 * and string literals, so the statement can travel in a simple-protocol message.
 */
export function inlineValues(client: pg.ClientBase, text: string, values: readonly unknown[]): string {
  return replacePlaceholders(text, (n) => literalOf(client, values[n - 1]));
}

/**
 * A read in a single network round trip: BEGIN, the scope's settings, the statement and COMMIT travel as
 * one simple-protocol message. Answers the statement's result.
 */
export function queryInOneRoundTrip(
  pool: pg.Pool,
  scope: TransactionScope,
  statement: { text: string; values: readonly unknown[] },
  rowMode?: "array",
): Promise<pg.QueryResult> {
  return withPooledClient(pool, async (client) => {
    const message = `${beginStatement(client, scope)}; ${inlineValues(client, statement.text, statement.values)}; commit`;
    try {
      const results = (await (rowMode === "array"
        ? client.query({ text: message, rowMode: "array" })
        : client.query(message))) as unknown as pg.QueryResult[];
      return results[results.length - 2];
    } catch (e) {
      // The failed statement left the transaction aborted: end it before the connection goes back to the pool.
      await rollback(client);
      throw e;
    }
  });
}

/**
 * Reads for grafast in one network round trip each: every statement travels with BEGIN READ ONLY, the
 * scope's role, claims and settings, and COMMIT (queryInOneRoundTrip). Grafast runs one statement per
 * call; the rare caller that asks for a transaction of its own gets a real one.
 */
export function withReadsInOneRoundTrip(pool: pg.Pool, scope: TransactionScope): WithPgClient {
  const readScope = { ...scope, readOnly: true };
  const client: PgClient = {
    async query<TData>(q: PgClientQuery): Promise<PgClientResult<TData>> {
      const { rows, rowCount } = await queryInOneRoundTrip(
        pool,
        readScope,
        { text: q.text, values: q.values ?? [] },
        q.arrayMode ? "array" : undefined,
      );
      return { rows: rows as TData[], rowCount };
    },
    withTransaction: (callback) =>
      withTransaction(pool, readScope, (pgClient) =>
        makeWithPgClientViaPgClientAlreadyInTransaction(pgClient, true)(null, callback as never),
      ),
  };
  return async (_pgSettings, callback) => callback(client);
}

/**
 * Whether an error says the database is out of reach rather than that a statement failed: a network error
 * (ECONNREFUSED, ECONNRESET, ...), a connection-class SQLSTATE (08xxx), a server shutting down or starting
 * (57P01-57P03), or pg's "Connection terminated". Every API answers these 503, never 500.
 */
export function isDatabaseUnreachable(e: unknown): boolean {
  const code = (e as { code?: unknown } | undefined)?.code;
  if (typeof code === "string") {
    if (!/^[0-9A-Z]{5}$/.test(code)) return true;
    if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") return true;
  }
  return e instanceof Error && /^Connection terminated/.test(e.message);
}
