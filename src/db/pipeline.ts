import { createHash } from "node:crypto";
import pg from "pg";
import { prepareValue } from "pg/lib/utils";
import { KeptByPair } from "./keptByPair";
import { markBroken } from "./pooledClient";

/** Who a transaction runs as and what it may read of its caller: set locally, so grants and RLS decide. */
export interface TransactionScope {
  role: string;
  /** `request.jwt.claims`, read by RLS policies. */
  claims: Record<string, unknown>;
  /** Further `set_config(name, value, true)` settings, e.g. request.method or search_path. */
  settings?: Record<string, string>;
  readOnly?: boolean;
  /** With `readOnly`: every statement reads one snapshot, the transaction's first (repeatable read). */
  snapshot?: boolean;
  /**
   * The database's schema version (sql/project/820_schema_version.sql) the statements were planned for: checked
   * ahead of them in the same round trip, and a newer one fails them (`isSchemaChanged`) before they run.
   */
  schemaVersion?: string;
}

/**
 * The pipelining client: one statement and the statements that travel ahead of it (the settings, BEGIN,
 * savepoints) as one pipeline of extended-protocol messages, sent in one write and answered in one network round
 * trip, on statements each connection keeps prepared. pg cannot pipeline by itself: a pipeline is a pg Query
 * whose `prepare` writes every message (PipelinedQuery). What the statements mean (a transaction, an implicit
 * one) is the caller's (db/transaction.ts).
 */

/**
 * The schema check (sql/project/820_schema_version.sql) with the planned version as `param`: no row while the
 * database's version is the planned one, else an error (a failed cast, whose message `isSchemaChanged` knows:
 * a function that raises would cost three times as much on every request).
 */
function schemaCheck(param: string): string {
  return `select ('strata: the schema changed, now version ' || sum(changes))::int from extensions.strata_schema_changes having sum(changes) > ${param}::bigint`;
}

/** The schema check as a statement of its own. */
export const SCHEMA_CHECK = schemaCheck("$1");

/**
 * In the settings' names, the schema check: a column of the settings statement ahead of every set_config, its
 * value the planned version. Its table's privilege is checked when the statement starts, before the role is
 * set: the connection's login reads it (the request's role may not).
 */
const SCHEMA_CHECK_COLUMN = "\u0000schema check";

/**
 * The scope's settings in the order they are set (role and claims last, so they win over a setting of the same
 * name), as names and values: plain text parameters, which the driver sends as they are. The schema check
 * first, when the scope has a version.
 */
function settingsOf(scope: TransactionScope): { names: string[]; values: string[] } {
  const names: string[] = [];
  const values: string[] = [];
  if (scope.schemaVersion !== undefined) {
    names.push(SCHEMA_CHECK_COLUMN);
    values.push(scope.schemaVersion);
  }
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
    const calls = names.map((n, i) =>
      n === SCHEMA_CHECK_COLUMN
        ? `(${schemaCheck(`$${i + 1}`)})`
        : `set_config('${n.replaceAll("'", "''")}', $${i + 1}, true)`,
    );
    node.statement = { name: `strata_settings_${settingsStatements++}`, text: `select ${calls.join(", ")}` };
  }
  return node.statement;
}

/**
 * The statement that sets `count` settings with names and values bound (when too many sequences were seen),
 * after the schema check (its version the first parameter) when `checked`.
 */
const boundSettingsTexts = new Map<string, string>();
function boundSettingsText(count: number, checked: boolean): string {
  const key = `${count}${checked ? "+check" : ""}`;
  let text = boundSettingsTexts.get(key);
  if (text === undefined) {
    const first = checked ? 2 : 1;
    const calls = Array.from(
      { length: count },
      (_, i) => `set_config($${first + 2 * i}, $${first + 2 * i + 1}, true)`,
    );
    if (checked) calls.unshift(`(${schemaCheck("$1")})`);
    text = `select ${calls.join(", ")}`;
    boundSettingsTexts.set(key, text);
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

/** A statement sent ahead of the main one in the same pipeline; its rows and completion are not the result. */
export interface Preamble {
  text: string;
  /** Its prepared statement's name, "" for the unnamed statement. */
  name: string;
  values: unknown[];
  parse: boolean;
}

/** A statement ahead of the main one: Parse (when due), Bind and Execute, no Describe (its rows are not read). */
function sendAhead(connection: PgConnection, statement: Preamble): void {
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

  constructor(
    text: string,
    values: unknown[],
    rowMode: "array" | undefined,
    private readonly preamble: Preamble[],
    /** The statement's name ("" for the unnamed statement) and whether to parse it first. */
    private readonly plan: { name: string; parse: boolean },
    /** The statement's row shape when the connection knows it (no Describe then), else where to keep it. */
    private readonly shape: RowShape | ((shape: RowShape) => void),
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
    for (const p of this.preamble) sendAhead(connection, p);
    // Parsed after the settings: names resolve with the request's search_path and privileges of its role.
    if (this.plan.parse) connection.parse({ text: this.text, name: this.plan.name, types: [] });
    connection.bind({ statement: this.plan.name, values: this.values });
    if (typeof this.shape === "function") connection.describe({ type: "P", name: "" });
    connection.execute({ portal: "" });
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
    if (this.pending === 0) super.handleDataRow(msg);
  }

  override handleCommandComplete(msg: unknown, connection: PgConnection): void {
    if (this.pending > 0) this.pending--;
    else super.handleCommandComplete(msg, connection);
  }
}

/** The scope's settings statement as a preamble, parsed when the connection has not prepared it yet. */
export function settingsPreamble(client: pg.ClientBase, scope: TransactionScope): Preamble {
  const known = preparedSet(client);
  const { names, values } = settingsOf(scope);
  const statement = settingsStatement(names);
  if (statement !== null) return { ...statement, values, parse: !known.has(statement.name) };
  const checked = names[0] === SCHEMA_CHECK_COLUMN;
  const skip = checked ? 1 : 0;
  const pairs = names.slice(skip).flatMap((n, i) => [n, values[i + skip]!]);
  const bound = checked ? [values[0]!, ...pairs] : pairs;
  const count = names.length - skip;
  const name = `strata_settings_bound_${count}${checked ? "_checked" : ""}`;
  return { text: boundSettingsText(count, checked), name, values: bound, parse: !known.has(name) };
}

/** A statement without parameters (BEGIN, a savepoint, COMMIT), unnamed: parsed each time it is sent. */
export function plainStatement(text: string): Preamble {
  return { text, name: "", values: [], parse: true };
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
export async function pipelined(
  client: pg.ClientBase,
  scope: TransactionScope,
  preamble: Preamble[],
  statement: { text: string; values: readonly unknown[] },
  rowMode?: "array",
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
  // Known from now on: a connection runs its pipelines in order, so one sent after this one finds them parsed.
  // Whether they exist afterwards depends on where this one fails.
  const parsed = [
    ...preamble.filter((p) => p.parse).map((p) => p.name),
    ...(plan.parse ? [plan.name] : []),
  ].filter((n) => n !== "");
  for (const n of parsed) known.add(n);
  try {
    const result = await new Promise<pg.QueryResult>((resolve, reject) => {
      const query = new PipelinedQuery(statement.text, values, rowMode, preamble, plan, shape, (err, res) =>
        err ? reject(err) : resolve(res),
      );
      void client.query(query as unknown as pg.Submittable);
    });
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
      if (err) markBroken(client);
      resolve();
    });
    void client.query(close as unknown as pg.Submittable);
  });
}
