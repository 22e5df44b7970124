import pg from "pg";
import { prepareValue } from "pg/lib/utils";
import { NulInText } from "./errors";
import {
  pipelined,
  plainStatement,
  SCHEMA_CHECK,
  settingsPreamble,
  type Preamble,
  type TransactionScope,
} from "./pipeline";

export type { TransactionScope } from "./pipeline";
import { markBroken, withPooledClient } from "./pooledClient";

export { asPoolTimeout, isDatabaseUnreachable, isSchemaChanged, PoolTimeout } from "./errors";

/**
 * Every transaction of Strata starts here: `withTransaction` for work under a role and its claims (data
 * requests), `withAdminTransaction` for the platform's own work as the connection's user, `queryInOneRoundTrip`
 * and `withPipelinedTransaction` for data requests whose statements travel as pipelines (db/pipeline.ts). One
 * treatment of a failed rollback for all: the work's error is what the caller sees, and a pooled connection
 * whose rollback failed is destroyed instead of going back to the pool.
 */

/** The BEGIN of a transaction of `scope`. */
function beginText(scope: Pick<TransactionScope, "readOnly" | "snapshot">): string {
  if (!scope.readOnly) return "begin";
  return scope.snapshot ? "begin isolation level repeatable read read only" : "begin read only";
}

async function rollback(client: pg.ClientBase): Promise<void> {
  await client.query("rollback").catch(() => markBroken(client));
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
  const check =
    scope.schemaVersion === undefined
      ? ""
      : `${SCHEMA_CHECK.replace("$1", literalOf(client, scope.schemaVersion))}; `;
  return `${beginText(scope)}; ${check}select ${configs.join(", ")}`;
}

/**
 * A value as an SQL literal, for the message that travels in the simple protocol (which binds no parameters):
 * the text pg itself would send for it, quoted by pg's own `escapeLiteral`. The one place Strata writes a
 * literal into SQL text.
 */
function literalOf(client: pg.ClientBase, value: unknown): string {
  const prepared = prepareValue(value);
  if (prepared === null || prepared === undefined) return "null";
  // A NUL would end the simple-protocol message early: refused as PostgreSQL refuses it in a bound value.
  if (typeof prepared === "string" && prepared.includes("\u0000")) throw new NulInText();
  return client.escapeLiteral(Buffer.isBuffer(prepared) ? `\\x${prepared.toString("hex")}` : prepared);
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

/**
 * Runs `work` in one read-only repeatable-read transaction on a held client: every statement sees the
 * database as of the transaction's first query (a dump, a copy).
 */
export function withSnapshotTransaction<C extends pg.ClientBase, T>(
  client: C,
  work: (client: C) => Promise<T>,
): Promise<T> {
  return transact(client, beginText({ readOnly: true, snapshot: true }), work as never);
}

/**
 * A statement in a single network round trip, on prepared statements: the scope's settings and the statement
 * travel as one pipeline, one implicit transaction (everything up to the pipeline's Sync commits together, or
 * nothing does). Answers the statement's result.
 */
export function queryInOneRoundTrip(
  pool: pg.Pool,
  scope: TransactionScope,
  statement: { text: string; values: readonly unknown[] },
  rowMode?: "array",
): Promise<pg.QueryResult> {
  return withPooledClient(pool, (client) =>
    pipelined(client, scope, [settingsPreamble(client, scope)], statement, rowMode),
  );
}

/**
 * The statements of one transaction whose BEGIN, settings and savepoints travel with the next statement
 * instead of costing round trips of their own: the first statement opens the transaction in its own pipeline
 * (BEGIN, settings, statement), a savepoint is sent ahead of the statement after it, and the release of the
 * last savepoint goes with COMMIT.
 */
export class PipelinedTransaction {
  private opened = false;
  /** Parameterless statements (savepoints and their releases) waiting for the next statement or the commit. */
  private readonly deferred: string[] = [];

  constructor(
    private readonly client: pg.ClientBase,
    private readonly scope: TransactionScope,
  ) {}

  /** Runs a statement of the transaction, with whatever waits to be sent ahead of it. */
  query(statement: { text: string; values: readonly unknown[] }, rowMode?: "array"): Promise<pg.QueryResult> {
    const preamble: Preamble[] = [];
    if (!this.opened) {
      this.opened = true;
      preamble.push(plainStatement(beginText(this.scope)), settingsPreamble(this.client, this.scope));
    }
    for (const text of this.deferred.splice(0)) preamble.push(plainStatement(text));
    return pipelined(this.client, this.scope, preamble, statement, rowMode);
  }

  /** Starts a savepoint; it reaches the database with the next statement, and not at all without one. */
  savepoint(name: string): void {
    this.deferred.push(`savepoint ${name}`);
  }

  /** Keeps the savepoint's work: nothing to send when no statement ran since it. */
  release(name: string): void {
    if (!this.dropDeferred(`savepoint ${name}`)) this.deferred.push(`release savepoint ${name}`);
  }

  /** Undoes the work since the savepoint, at once (the transaction is unusable until then). */
  async rollbackTo(name: string): Promise<void> {
    if (this.dropDeferred(`savepoint ${name}`)) return;
    this.deferred.length = 0;
    await this.client.query(`rollback to savepoint ${name}`);
  }

  /** Commits, with the last releases, in one round trip; a transaction that sent nothing has nothing to end. */
  async commit(): Promise<void> {
    const releases = this.deferred.splice(0);
    if (this.opened) await this.client.query([...releases, "commit"].join("; "));
  }

  async rollback(): Promise<void> {
    this.deferred.length = 0;
    if (this.opened) await rollback(this.client);
  }

  private dropDeferred(text: string): boolean {
    const i = this.deferred.lastIndexOf(text);
    if (i === -1 || i !== this.deferred.length - 1) return false;
    this.deferred.pop();
    return true;
  }
}

/**
 * Runs `work` in one transaction with the scope's role, claims and settings (read only and on one snapshot
 * when the scope says so), on a client of `pool`, sending BEGIN and the settings with the first statement
 * (PipelinedTransaction). Commits when `work` resolves, rolls back when it throws.
 */
export function withPipelinedTransaction<T>(
  pool: pg.Pool,
  scope: TransactionScope,
  work: (tx: PipelinedTransaction) => Promise<T>,
): Promise<T> {
  return withPooledClient(pool, async (client) => {
    const tx = new PipelinedTransaction(client, scope);
    try {
      const result = await work(tx);
      await tx.commit();
      return result;
    } catch (e) {
      await tx.rollback();
      throw e;
    }
  });
}
