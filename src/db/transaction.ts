import type { PgClient, PgClientQuery, PgClientResult, WithPgClient } from "@dataplan/pg";
import { makeWithPgClientViaPgClientAlreadyInTransaction } from "@dataplan/pg/adaptors/pg";
import { createHash } from "node:crypto";
import pg from "pg";
import { prepareValue } from "pg/lib/utils";
import { KeptByPair } from "./keptByPair";
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

/**
 * Runs `work` in one read-only repeatable-read transaction on a held client: every statement sees the
 * database as of the transaction's first query (a dump, a copy).
 */
export function withSnapshotTransaction<C extends pg.ClientBase, T>(
  client: C,
  work: (client: C) => Promise<T>,
): Promise<T> {
  return transact(client, "begin isolation level repeatable read read only", work as never);
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
 * The scope's settings in the order they are set (role and claims last, so they win over a setting of the same
 * name), as names and values: plain text parameters, which the driver sends as they are.
 */
function settingsOf(scope: TransactionScope): { names: string[]; values: string[] } {
  const names: string[] = [];
  const values: string[] = [];
  // First: a read-only transaction stays read-only whatever the statement calls.
  if (scope.readOnly) {
    names.push("transaction_read_only");
    values.push("on");
  }
  for (const name in scope.settings) {
    names.push(name);
    values.push(scope.settings[name]!);
  }
  names.push("role", "request.jwt.claims");
  values.push(scope.role, JSON.stringify(scope.claims));
  return { names, values };
}

/**
 * The statement that sets these settings: one `set_config` per column, evaluated in order, the names written
 * in its text and only the values bound. Kept by the sequence of names (a tree, so no key is built per
 * request), each prepared once per connection; past MAX_SETTINGS_STATEMENTS sequences, names are bound too,
 * in a statement per count.
 */
interface SettingsStatement {
  name: string;
  text: string;
}
interface NamesNode {
  statement?: SettingsStatement;
  next: Map<string, NamesNode>;
}
const MAX_SETTINGS_STATEMENTS = 64;
const settingsByNames: NamesNode = { next: new Map() };
let settingsStatements = 0;

function settingsStatement(names: readonly string[]): SettingsStatement | null {
  let node = settingsByNames;
  for (const name of names) {
    let next = node.next.get(name);
    if (next === undefined) {
      if (settingsStatements >= MAX_SETTINGS_STATEMENTS) return null;
      node.next.set(name, (next = { next: new Map() }));
    }
    node = next;
  }
  if (node.statement === undefined) {
    if (settingsStatements >= MAX_SETTINGS_STATEMENTS) return null;
    const calls = names.map((n, i) => `set_config('${n.replaceAll("'", "''")}', $${i + 1}, true)`);
    node.statement = { name: `strata_settings_${settingsStatements++}`, text: `select ${calls.join(", ")}` };
  }
  return node.statement;
}

/** The statement that sets `count` settings with names and values bound (when too many sequences were seen). */
const boundSettingsTexts: string[] = [];
function boundSettingsText(count: number): string {
  let text = boundSettingsTexts[count];
  if (text === undefined) {
    const calls = Array.from({ length: count }, (_, i) => `set_config($${2 * i + 1}, $${2 * i + 2}, true)`);
    boundSettingsTexts[count] = text = `select ${calls.join(", ")}`;
  }
  return text;
}

/** Statements a connection keeps prepared at most; a statement beyond them is parsed each time. */
const MAX_PREPARED = 200;
/** The names of the statements prepared on each connection (by this module). */
const preparedOn = new WeakMap<object, Set<string>>();

/**
 * What a prepared statement's RowDescription gave pg's result (its fields and their parsers): kept per
 * connection and statement, so a statement executed again skips Describe and the description's decoding. A
 * prepared statement's row type cannot change (PostgreSQL refuses a re-plan that would change it: "cached plan
 * must not change result type"); a statement parsed again is described again.
 */
interface RowShape {
  fields: unknown[];
  parsers: unknown[];
  empty: unknown;
}
const rowShapesOn = new WeakMap<object, Map<string, RowShape>>();

/** Statement names already digested, by role and search_path, then text: the same few come with nearly every request. */
const statementNames = new KeptByPair<string>(500);

/**
 * The statement name of a text for a role and search_path: a digest, so equal texts share one prepared
 * statement. A statement is analysed (names resolved, schema privileges checked) when it is parsed, so
 * it is only reused by the role and search_path it was parsed for.
 */
function statementName(scope: TransactionScope, text: string): string {
  const context = `${scope.role}\u0000${scope.settings?.search_path ?? ""}`;
  return statementNames.get(
    context,
    text,
    () => "strata_" + createHash("sha1").update(`${context}\u0000${text}`).digest("base64url"),
  );
}

/** What pg's Query does internally, which PipelinedRead builds on (not in pg's type declarations). */
interface QueryInternals {
  text: string;
  values: unknown[];
  _rowMode: string | undefined;
  _result: ResultInternals;
  _results: unknown;
  _accumulateRows: boolean;
  prepare(connection: PgConnection): void;
  handleRowDescription(msg: unknown): void;
  handleDataRow(msg: unknown): void;
  handleCommandComplete(msg: unknown, connection: PgConnection): void;
  handleError(err: Error, connection: PgConnection): void;
}
interface PgConnection {
  parse(config: { text: string; name: string; types: unknown[] }): void;
  bind(config: { statement: string; values: unknown[]; portal?: string }): void;
  describe(config: { type: "P"; name: string }): void;
  execute(config: { portal: string }): void;
  close(config: { type: "S"; name: string }): void;
  sync(): void;
}
const BaseQuery = pg.Query as unknown as new (
  text: string,
  values: unknown[],
  callback: (err: Error | null, result: pg.QueryResult) => void,
) => QueryInternals;
/** What pg's Result keeps of a RowDescription (see RowShape). */
interface ResultInternals {
  fields: unknown[];
  _parsers: unknown[];
  _prebuiltEmptyResultObject: unknown;
}
/** pg's result collector, which a Query makes for its row mode. */
const PgResult = (pg as unknown as { Result: new (rowMode?: string) => ResultInternals }).Result;

/** A statement sent ahead of (or after) the main one in the same pipeline; its rows and completion are not the result. */
interface Preamble {
  text: string;
  /** Its prepared statement's name, "" for the unnamed statement. */
  name: string;
  values: unknown[];
  parse: boolean;
}

/** A statement beside the main one: Parse (when due), Bind and Execute, no Describe (its rows are not read). */
function sendAside(connection: PgConnection, statement: Preamble): void {
  if (statement.parse) connection.parse({ text: statement.text, name: statement.name, types: [] });
  connection.bind({ statement: statement.name, values: statement.values });
  connection.execute({ portal: "" });
}

/**
 * One statement as one pipeline of extended-protocol messages, sent in one write and answered in one round
 * trip: Bind/Execute of each preamble statement (the settings, or BEGIN and savepoints), then Bind/Describe/
 * Execute of the statement (each preceded by Parse when the connection has not prepared it yet), one Sync.
 * Without BEGIN, everything up to the Sync is one implicit transaction: the settings are local to it
 * (`set_config(..., true)`), the role is in force when the statement is planned (grants and RLS apply), and an
 * error rolls it all back.
 */
class PipelinedQuery extends BaseQuery {
  /** Preamble statements whose completion has not arrived yet. */
  private pending: number;
  /** Whether the statement's own completion arrived (what completes after it is a trailing statement's). */
  private completed = false;

  constructor(
    text: string,
    values: unknown[],
    rowMode: "array" | undefined,
    private readonly preamble: Preamble[],
    /** The statement's name ("" for the unnamed statement) and whether to parse it first. */
    private readonly plan: { name: string; parse: boolean },
    /** The statement's row shape when the connection knows it (no Describe then), else where to keep it. */
    private readonly shape: RowShape | ((shape: RowShape) => void),
    /** Statements sent after it in the same pipeline (COMMIT). */
    private readonly trailing: Preamble[],
    callback: (err: Error | null, result: pg.QueryResult) => void,
  ) {
    // The text, not a config object: pg copies a config object property by property, per query.
    super(text, values, callback);
    if (rowMode) {
      this._rowMode = rowMode;
      this._result = this._results = new PgResult(rowMode);
    }
    this.pending = preamble.length;
    if (typeof shape !== "function") {
      this._result.fields = shape.fields;
      this._result._parsers = shape.parsers;
      this._result._prebuiltEmptyResultObject = shape.empty;
      // What pg decides on a RowDescription: a query with a callback keeps its rows.
      this._accumulateRows = true;
    }
  }

  requiresPreparation(): boolean {
    return true;
  }

  override prepare(connection: PgConnection): void {
    for (const p of this.preamble) sendAside(connection, p);
    // Parsed after the settings: names resolve with the request's search_path and privileges of its role.
    if (this.plan.parse) connection.parse({ text: this.text, name: this.plan.name, types: [] });
    connection.bind({ statement: this.plan.name, values: this.values });
    if (typeof this.shape === "function") connection.describe({ type: "P", name: "" });
    connection.execute({ portal: "" });
    for (const t of this.trailing) sendAside(connection, t);
    connection.sync();
  }

  override handleRowDescription(msg: unknown): void {
    super.handleRowDescription(msg);
    if (typeof this.shape === "function") {
      const { fields, _parsers, _prebuiltEmptyResultObject } = this._result;
      this.shape({ fields, parsers: _parsers, empty: _prebuiltEmptyResultObject });
    }
  }

  override handleDataRow(msg: unknown): void {
    if (this.pending === 0 && !this.completed) super.handleDataRow(msg);
  }

  override handleCommandComplete(msg: unknown, connection: PgConnection): void {
    if (this.pending > 0) this.pending--;
    else if (!this.completed) {
      this.completed = true;
      super.handleCommandComplete(msg, connection);
    }
  }
}

/** The settings statement as a preamble, parsed on connections that have not prepared it yet. */
function settingsPreamble(scope: TransactionScope, known: Set<string>): Preamble {
  const { names, values } = settingsOf(scope);
  const statement = settingsStatement(names);
  if (statement !== null) return { ...statement, values, parse: !known.has(statement.name) };
  const bound = names.flatMap((n, i) => [n, values[i]!]);
  const name = `strata_settings_bound_${names.length}`;
  return { text: boundSettingsText(names.length), name, values: bound, parse: !known.has(name) };
}

/** The statements prepared on a connection (by this module). */
function preparedSet(client: pg.ClientBase): Set<string> {
  let prepared = preparedOn.get(client);
  if (!prepared) preparedOn.set(client, (prepared = new Set()));
  return prepared;
}

/** The row shapes of the statements prepared on a connection. */
function rowShapes(client: pg.ClientBase): Map<string, RowShape> {
  let shapes = rowShapesOn.get(client);
  if (!shapes) rowShapesOn.set(client, (shapes = new Map()));
  return shapes;
}

/**
 * Sends a statement with its preamble in one round trip, on prepared statements where the connection has
 * room for them (a connection that holds its share parses further ones each time, unnamed).
 */
async function pipelined(
  client: pg.ClientBase,
  scope: TransactionScope,
  preamble: Preamble[],
  statement: { text: string; values: readonly unknown[] },
  rowMode?: "array",
  trailing: Preamble[] = [],
): Promise<pg.QueryResult> {
  // Values become text (or bytes) before anything is sent, so a value that cannot fails alone.
  const values = statement.values.map((v) => prepareValue(v) as unknown);
  const known = preparedSet(client);
  const name = statementName(scope, statement.text);
  const named = known.has(name) || known.size < MAX_PREPARED;
  const plan = { name: named ? name : "", parse: !named || !known.has(name) };
  // A statement parsed now is described now; one the connection keeps is executed with the shape it had.
  const shapes = rowShapes(client);
  if (plan.parse) shapes.delete(plan.name);
  const shape =
    (plan.parse ? undefined : shapes.get(plan.name)) ??
    ((s: RowShape) => plan.name && shapes.set(plan.name, s));
  // Whether the statements parsed in this pipeline exist afterwards depends on where it fails.
  const parsed = [
    ...preamble.filter((p) => p.parse).map((p) => p.name),
    ...(plan.parse ? [plan.name] : []),
  ].filter((n) => n !== "");
  try {
    const result = await new Promise<pg.QueryResult>((resolve, reject) => {
      const query = new PipelinedQuery(
        statement.text,
        values,
        rowMode,
        preamble,
        plan,
        shape,
        trailing,
        (err, res) => (err ? reject(err) : resolve(res)),
      );
      void client.query(query as unknown as pg.Submittable);
    });
    for (const n of parsed) known.add(n);
    return result;
  } catch (e) {
    if (parsed.length) {
      for (const n of parsed) {
        known.delete(n);
        shapes.delete(n);
      }
      await closePrepared(client, parsed);
    }
    throw e;
  }
}

/**
 * A statement in a single network round trip, on prepared statements: the scope's settings and the statement
 * travel as one pipeline, one implicit transaction (PipelinedQuery). Answers the statement's result.
 */
export function queryInOneRoundTrip(
  pool: pg.Pool,
  scope: TransactionScope,
  statement: { text: string; values: readonly unknown[] },
  rowMode?: "array",
): Promise<pg.QueryResult> {
  return withPooledClient(pool, (client) =>
    pipelined(client, scope, [settingsPreamble(scope, preparedSet(client))], statement, rowMode),
  );
}

/**
 * The statements of one transaction whose BEGIN, settings and savepoints travel with the next statement
 * instead of costing round trips of their own: the first statement opens the transaction in its own
 * pipeline (BEGIN, settings, statement), a savepoint is sent ahead of the statement after it, and the
 * release of the last savepoint goes with COMMIT.
 */
export class PipelinedTransaction {
  private opened = false;
  /** Committed in the pipeline of its last statement (see `query`'s `commit`). */
  private committed = false;
  /** Its only statement ran as an implicit transaction: committed with it, or rolled back by the server. */
  private implicit = false;
  /** Parameterless statements (savepoints and their releases) waiting for the next statement or the commit. */
  private readonly deferred: string[] = [];

  constructor(
    private readonly client: pg.ClientBase,
    private readonly scope: TransactionScope,
  ) {}

  /**
   * Runs a statement of the transaction, with whatever waits to be sent ahead of it. `commit`: the caller knows
   * it is the transaction's last statement, so COMMIT travels in its pipeline and the transaction costs no
   * round trip of its own (an error of the statement skips the COMMIT: the transaction stays open to roll back).
   */
  async query(
    statement: { text: string; values: readonly unknown[] },
    rowMode?: "array",
    commit = false,
  ): Promise<pg.QueryResult> {
    // A caller that said "last" and was wrong: refused, not run outside the transaction it belonged to.
    if (this.committed || this.implicit)
      throw new Error("A statement came after its transaction committed with its last statement");
    if (!this.opened && commit && !this.scope.readOnly) {
      // The transaction's only statement: it and the settings are one implicit transaction (everything up to
      // the pipeline's Sync commits together, or nothing does), so neither BEGIN nor COMMIT is sent; the
      // savepoints waiting for it (a mutation field's) have nothing to protect.
      this.implicit = true;
      this.deferred.length = 0;
      const settings = [settingsPreamble(this.scope, preparedSet(this.client))];
      const result = await pipelined(this.client, this.scope, settings, statement, rowMode);
      this.committed = true;
      return result;
    }
    const preamble: Preamble[] = [];
    const plain = (text: string): Preamble => ({ text, name: "", values: [], parse: true });
    if (!this.opened) {
      this.opened = true;
      preamble.push(plain(this.scope.readOnly ? "begin read only" : "begin"));
      preamble.push(settingsPreamble(this.scope, preparedSet(this.client)));
    }
    preamble.push(...this.deferred.splice(0).map(plain));
    const trailing = commit ? [plain("commit")] : [];
    const result = await pipelined(this.client, this.scope, preamble, statement, rowMode, trailing);
    this.committed = commit;
    return result;
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
    // Committed with its last statement, or ended with it: nothing is left to undo (the caller's error still
    // fails the request).
    if (this.committed || this.implicit || this.dropDeferred(`savepoint ${name}`)) return;
    this.deferred.length = 0;
    await this.client.query(`rollback to savepoint ${name}`);
  }

  /**
   * Commits: with the last releases, in one round trip; a transaction that sent nothing, or committed with its
   * last statement (whose savepoints ended with it), has nothing to end.
   */
  async commit(): Promise<void> {
    if (this.committed) this.deferred.length = 0;
    else if (this.opened) await this.client.query([...this.deferred.splice(0), "commit"].join("; "));
  }

  async rollback(): Promise<void> {
    this.deferred.length = 0;
    if (this.opened && !this.committed && !this.implicit) await rollback(this.client);
  }

  private dropDeferred(text: string): boolean {
    const i = this.deferred.lastIndexOf(text);
    if (i === -1 || i !== this.deferred.length - 1) return false;
    this.deferred.pop();
    return true;
  }
}

/**
 * Runs `work` in one transaction with the scope's role, claims and settings, on a client of `pool`, sending
 * BEGIN and the settings with the first statement (PipelinedTransaction). Commits when `work` resolves, rolls
 * back when it throws.
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

/** Closes prepared statements (a Close of a statement that does not exist is no error), in one round trip. */
class ClosePrepared extends BaseQuery {
  constructor(
    private readonly names: string[],
    callback: (err: Error | null) => void,
  ) {
    super("", [], callback);
  }

  requiresPreparation(): boolean {
    return true;
  }

  override prepare(connection: PgConnection): void {
    for (const name of this.names) connection.close({ type: "S", name });
    connection.sync();
  }
}

async function closePrepared(client: pg.ClientBase, names: string[]): Promise<void> {
  await new Promise<void>((resolve) => {
    const close = new ClosePrepared(names, (err) => {
      // A connection whose statements are in an unknown state must not be reused.
      if (err) broken.add(client);
      resolve();
    });
    void client.query(close as unknown as pg.Submittable);
  });
}

/** Marks a grafast query as its request's last statement (asLastStatement). */
const LAST_STATEMENT = Symbol("strata.lastStatement");

/**
 * The query marked as its request's last statement: inside a request's transaction, COMMIT then travels with
 * it (PipelinedTransaction.query's `commit`).
 */
export function asLastStatement<Q extends object>(query: Q): Q {
  return Object.assign({ ...query }, { [LAST_STATEMENT]: true });
}

/** Grafast's `query` over a runner of statements: its text, values and array mode in, rows and count out. */
function grafastQuery(
  run: (
    statement: { text: string; values: readonly unknown[] },
    rowMode: "array" | undefined,
    last: boolean,
  ) => Promise<pg.QueryResult>,
): PgClient["query"] {
  return async <TData>(q: PgClientQuery): Promise<PgClientResult<TData>> => {
    const { rows, rowCount } = await run(
      { text: q.text, values: q.values ?? [] },
      q.arrayMode ? "array" : undefined,
      (q as { [LAST_STATEMENT]?: boolean })[LAST_STATEMENT] === true,
    );
    return { rows: rows as TData[], rowCount };
  };
}

/**
 * Reads for grafast in one network round trip each: every statement travels with BEGIN READ ONLY, the
 * scope's role, claims and settings, and COMMIT (queryInOneRoundTrip). Grafast runs one statement per
 * call; the rare caller that asks for a transaction of its own gets a real one.
 */
export function withReadsInOneRoundTrip(pool: pg.Pool, scope: TransactionScope): WithPgClient {
  const readScope = { ...scope, readOnly: true };
  const client: PgClient = {
    query: grafastQuery((statement, rowMode) => queryInOneRoundTrip(pool, readScope, statement, rowMode)),
    withTransaction: (callback) =>
      withTransaction(pool, readScope, (pgClient) =>
        makeWithPgClientViaPgClientAlreadyInTransaction(pgClient, true)(null, callback as never),
      ),
  };
  return async (_pgSettings, callback) => callback(client);
}

/**
 * Grafast's client inside a PipelinedTransaction: every statement of the request in that one transaction,
 * a nested transaction (grafast wraps each mutation field in one) as a savepoint that costs no round trip
 * of its own (see PipelinedTransaction).
 */
export function withPgClientInTransaction(tx: PipelinedTransaction): WithPgClient {
  let savepoints = 0;
  // Nested transactions one after the other, as @dataplan/pg's own adaptor runs them.
  let queue: Promise<unknown> = Promise.resolve();
  const client: PgClient = {
    query: grafastQuery((statement, rowMode, last) => tx.query(statement, rowMode, last)),
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
