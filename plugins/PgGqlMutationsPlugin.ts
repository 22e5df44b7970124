import {
  pgSelect,
  pgWhereConditionSpecListToSQL,
  sideEffectWithPgClient,
  TYPES,
  type PgClient,
  type PgClientQuery,
  type WithPgClient,
  type PgCodecAttribute,
  type PgCodecWithAttributes,
  type PgResource,
  type PgSelectStep,
} from "@dataplan/pg";
import { randomBytes } from "node:crypto";
import { access, lambda, type FieldArgs, type FieldInfo, type Step } from "grafast";
import { Kind, type DocumentNode, type GraphQLInputType, type GraphQLOutputType } from "grafast/graphql";
import type { PgAttribute, PgClass } from "pg-introspection";
import { sql, type SQL } from "pg-sql2";
import { PgGqlError } from "./pgGqlErrors";
import {
  applyFilterValue,
  filterApplyStep,
  type AppliedFilter,
  type ApplyFilter,
  type FilterOperand,
} from "./pgGqlFilterOperands";
import { primaryKeyAttributes } from "./pgGqlNodeId";
import { nodeResources } from "./PgGqlNodePlugin";
import { assertMaxLength, columnInputInfo, type ColumnInputInfo } from "./pgGqlTypes";
import { replacePlaceholders } from "./pgGqlPlaceholders";
import {
  acceptingReturnedRows,
  plainColumnFields,
  recordsSelectOnly,
  returnedColumnsSql,
  returnedRecords,
  type ReturnedColumns,
} from "./pgGqlReturnedRows";

declare global {
  namespace GraphileBuild {
    interface Inflection {
      /** `insertInto<T>Collection` */
      pgGqlInsertField(this: Inflection, typeName: string): string;
      /** `update<T>Collection` */
      pgGqlUpdateField(this: Inflection, typeName: string): string;
      /** `deleteFrom<T>Collection` */
      pgGqlDeleteField(this: Inflection, typeName: string): string;
      /** `<T>InsertResponse` / `<T>UpdateResponse` / `<T>DeleteResponse` */
      pgGqlMutationResponseType(this: Inflection, typeName: string, kind: MutationKind): string;
    }
    interface ScopeObject {
      isPgGqlMutationResponse?: boolean;
    }
  }
}

type MutationKind = "insert" | "update" | "delete";

const PG_CLASS_OID = "1259";
const CHARACTER_TYPES = new Set(["varchar", "bpchar", "_varchar", "_bpchar"]);

/** Columns owning a sequence (`serial`), per introspection: pg_depend rows of kind 'a' from a sequence. */
const serialColumnsCache = new WeakMap<object, Set<string>>();
function serialColumns(introspection: {
  depends: {
    classid: string;
    objid: string;
    refobjid: string;
    refobjsubid: number | null;
    deptype: string;
  }[];
  classes: PgClass[];
}): Set<string> {
  let cached = serialColumnsCache.get(introspection);
  if (!cached) {
    const sequences = new Set(introspection.classes.filter((c) => c.relkind === "S").map((c) => c._id));
    cached = new Set(
      introspection.depends
        .filter(
          (d) =>
            d.deptype === "a" &&
            String(d.classid) === PG_CLASS_OID &&
            sequences.has(d.objid) &&
            d.refobjsubid != null &&
            d.refobjsubid > 0,
        )
        .map((d) => `${d.refobjid}:${d.refobjsubid}`),
    );
    serialColumnsCache.set(introspection, cached);
  }
  return cached;
}

/** The mutable columns of a table for one kind of write, by GraphQL field name. */
function writableColumns(
  build: GraphileBuild.Build,
  codec: PgCodecWithAttributes,
  kind: "insert" | "update",
): Map<string, string> {
  const columns = new Map<string, string>();
  for (const attributeName of Object.keys(codec.attributes)) {
    if (!build.behavior.pgCodecAttributeMatches([codec, attributeName], `attribute:${kind}`)) continue;
    if (!build.getGraphQLTypeByPgCodec(codec.attributes[attributeName].codec, "input")) continue;
    columns.set(build.inflection.attribute({ codec, attributeName }), attributeName);
  }
  return columns;
}

/** pg_graphql passes every input value as text (or text[] for arrays) cast to the column type. */
function textOf(value: unknown, nested = false): unknown {
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) {
    if (nested) throw new PgGqlError("Unexpected array in input value array");
    return value.map((v) => textOf(v, true));
  }
  if (typeof value === "object") {
    throw new PgGqlError(
      nested ? "Unexpected object in input value array" : "Unexpected object in input value",
    );
  }
  return String(value);
}

/** A column's input value as the text bound for it (after pg_graphql's length check). */
function valueText(attribute: PgCodecAttribute, value: unknown): unknown {
  assertMaxLength(value, columnInputInfo(attribute).maxLength);
  return textOf(value);
}

/** A bound value cast to its column's type. */
function boundValueSql(attribute: PgCodecAttribute, text: unknown): SQL {
  return sql`(${sql.value(text as string)}::${attribute.codec.sqlType})`;
}

/** The columns the role may read (RETURNING needs SELECT on each). */
function readableColumns(codec: PgCodecWithAttributes): string[] {
  return Object.entries(codec.attributes)
    .filter(
      ([, attribute]) => (attribute.extensions as { canSelect?: boolean } | undefined)?.canSelect !== false,
    )
    .map(([name]) => name);
}

/** The row at `alias` as jsonb, with the columns the role may read. */
function rowJsonSql(codec: PgCodecWithAttributes, alias: SQL): SQL {
  const readable = readableColumns(codec);
  // jsonb_build_object takes at most 100 arguments.
  const chunks: SQL[] = [];
  for (let i = 0; i < readable.length; i += 40) {
    const pairs = readable
      .slice(i, i + 40)
      .map((name) => sql`${sql.literal(name)}::text, ${alias}.${sql.identifier(name)}`);
    chunks.push(sql`jsonb_build_object(${sql.join(pairs, ", ")})`);
  }
  return chunks.length ? sql`(${sql.join(chunks, " || ")})` : sql`'{}'::jsonb`;
}

function pkJsonSql(resource: PgResource, column: (name: string) => SQL): SQL {
  return sql`jsonb_build_array(${sql.join(primaryKeyAttributes(resource).map(column), ", ")})`;
}

/**
 * A mutation's statement (see `mutationStatement`). One that answers the records select waits, under a token, in
 * the request's own registry until that select runs: the DML becomes its leading CTE, so one statement writes,
 * checks `atMost` and returns the records, whose relations read the snapshot from before the write, as in pg_graphql.
 */
interface PendingMutation {
  /** `with __pgGqlAffected as (<dml>), ...`, compiled. */
  text: string;
  values: readonly unknown[];
  /** The joined statements made with this text so far, by the records statement's text (see joinedText). */
  joined: Map<string, string>;
}

/** The mutations of one request that wait for their records statement, by token. */
type PendingMutations = Map<string, PendingMutation>;

/** SQLSTATE of `_strata_graphql.at_most` (bootstrap SQL) when a mutation affects more rows than `atMost`. */
const AT_MOST_SQLSTATE = "SGQ01";

/**
 * What a mutation's statement answers: its rows as jsonb for the records select it is prepended to (`columns`
 * null), or these columns of the rows it returned (see pgGqlReturnedRows). `key` tells them apart in kept texts.
 */
interface Answer {
  columns: ReturnedColumns | null;
  key: string;
}

/** The alias of the rows a mutation's DML returned. */
const AFFECTED_ALIAS = sql.identifier("__r");

/**
 * A mutation's statement: the DML (returning the columns the role may read) as the leading CTE, then its answer.
 * Past `atMost`, a one-row CTE of the affected count raises; the rows' answer joins it, the records select reads it.
 */
function mutationStatement(
  codec: PgCodecWithAttributes,
  dml: SQL,
  atMost: number | null,
  kind: MutationKind,
  answer: Answer,
): PendingMutation {
  // The function raises past `atMost`; within it, the comparison alone decides (no function call per statement).
  const limit =
    atMost === null
      ? sql.blank
      : sql`having count(*) <= ${sql.literal(atMost)} or _strata_graphql.at_most(${sql.literal(kind)}, count(*), ${sql.literal(atMost)})`;
  const affected = sql`with __pgGqlAffected as (${dml})`;
  let statement: SQL;
  if (answer.columns === null) {
    const rows = sql`coalesce(jsonb_agg(${rowJsonSql(codec, AFFECTED_ALIAS)}), '[]'::jsonb)`;
    statement = sql`${affected}, __pgGqlRows(__json) as (select ${rows} from __pgGqlAffected as ${AFFECTED_ALIAS} ${limit})`;
  } else {
    const columns = returnedColumnsSql(answer.columns, AFFECTED_ALIAS);
    statement =
      atMost === null
        ? sql`${affected} select ${columns} from __pgGqlAffected as ${AFFECTED_ALIAS}`
        : sql`${affected}, __pgGqlChecked as (select from __pgGqlAffected ${limit}) select ${columns} from __pgGqlAffected as ${AFFECTED_ALIAS}, __pgGqlChecked`;
  }
  const { text, values } = sql.compile(statement);
  return { text, values, joined: new Map() };
}

/**
 * A records statement's text (`count` values) after its mutation's (`offset` values ahead): the token's placeholders
 * read the mutation's rows, the others are renumbered.
 */
function recordsText(text: string, count: number, tokenAt: ReadonlySet<number>, offset: number): string {
  // Placeholder n (1-based) becomes the number of values kept up to it, after the mutation's.
  const renumbered: number[] = [];
  let kept = 0;
  for (let i = 0; i < count; i++) {
    if (!tokenAt.has(i)) kept++;
    renumbered[i] = offset + kept;
  }
  const body = replacePlaceholders(text, (n) =>
    tokenAt.has(n - 1) ? "(select __json from __pgGqlRows)" : `$${renumbered[n - 1]}`,
  );
  return /^\s*with\s/i.test(body) ? `, ${body.replace(/^\s*with\s/i, "")}` : ` ${body}`;
}

/** Joined statements kept per mutation text: a burst of new records statements starts over. */
const MAX_JOINED = 50;

/**
 * A mutation's text followed by its records statement's, kept with the mutation's (kept) text: the same operation
 * sends the same records statement every time, and the same string keeps its hash for the statement's name.
 */
function joinedText(
  pending: PendingMutation,
  records: string,
  count: number,
  tokenAt: ReadonlySet<number>,
): string {
  let text = pending.joined.get(records);
  if (text === undefined) {
    text = pending.text + recordsText(records, count, tokenAt, pending.values.length);
    if (pending.joined.size >= MAX_JOINED) pending.joined.clear();
    pending.joined.set(records, text);
  }
  return text;
}

/** The records statement of a pending mutation, with the mutation prepended; undefined for any other query. */
function withPendingMutation(
  query: PgClientQuery,
  pendingMutations: PendingMutations,
): PgClientQuery | undefined {
  const values = query.values ?? [];
  const token = values.find((v): v is string => typeof v === "string" && pendingMutations.has(v));
  if (token === undefined) return undefined;
  const pending = pendingMutations.get(token)!;
  pendingMutations.delete(token);
  const tokenAt = new Set<number>();
  const kept: unknown[] = [];
  values.forEach((value, index) => (value === token ? tokenAt.add(index) : kept.push(value)));
  const text = joinedText(pending, query.text, values.length, tokenAt);
  return { text, values: [...pending.values, ...kept], arrayMode: query.arrayMode };
}

/** `atMost` refused the mutation: pg_graphql's message, as a GraphQL error. */
function tooManyError(error: unknown): unknown {
  const e = error as { code?: string; message?: string } | undefined;
  return e?.code === AT_MOST_SQLSTATE ? new PgGqlError(e.message ?? "") : error;
}

/** Whether the operation a request runs is a mutation (the one operation, or the one named). */
function isMutationOperation(document: DocumentNode, operationName: string | null | undefined): boolean {
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    if (operationName && definition.name?.value !== operationName) continue;
    return definition.operation === "mutation";
  }
  return false;
}

/**
 * A pending mutation's token: a secret of the process and a counter, so no value a client sends can be taken
 * for one (a token stands among the records select's bound values), without a random UUID per mutation.
 */
const TOKEN_PREFIX = `pgGqlMutation:${randomBytes(16).toString("hex")}:`;
let tokenCount = 0;

/** A client of one request that holds its pending mutations and runs each with its records statement. */
interface MutationAwareClient extends PgClient {
  pendMutation(mutation: PendingMutation): string;
}

/**
 * A plain object delegating to the client: one made with the client as its prototype would turn the client
 * into a prototype object, which V8 reshapes at a cost on every request.
 */
function mutationAwareClient<TClient extends PgClient>(client: TClient, pending: PendingMutations): TClient {
  const aware = {
    pendMutation(mutation: PendingMutation): string {
      const token = `${TOKEN_PREFIX}${++tokenCount}`;
      pending.set(token, mutation);
      return token;
    },
    query(query: PgClientQuery) {
      const rewritten = withPendingMutation(query, pending);
      if (!rewritten) return client.query(query);
      return client.query(rewritten).catch((e: unknown) => {
        throw tooManyError(e);
      });
    },
    withTransaction<T>(callback: (client: TClient) => Promise<T>) {
      return client.withTransaction((tx) => callback(mutationAwareClient(tx, pending)));
    },
  };
  return aware as unknown as TClient;
}

/** Makes a mutation request's grafast context hand out clients that hold the request's pending mutations. */
function withMutationAwareClients(
  context: Record<string, unknown>,
  pgServices: readonly { withPgClientKey: string }[],
): void {
  const pending: PendingMutations = new Map();
  for (const { withPgClientKey } of pgServices) {
    const withPgClient = context[withPgClientKey] as WithPgClient | undefined;
    if (!withPgClient) continue;
    const aware: WithPgClient = (pgSettings, callback) =>
      withPgClient(pgSettings, (client) => callback(mutationAwareClient(client, pending)));
    context[withPgClientKey] = aware;
  }
}

/** The WHERE condition of a mutation's applied `filter`. */
function filterSql(filter: AppliedFilter, alias: SQL): SQL {
  return pgWhereConditionSpecListToSQL(alias, filter.conditions) ?? sql.true;
}

/**
 * The records of a mutation: the rows the statement returned, selected like query nodes (relations,
 * nodeId, computed fields), in the order the statement returned them.
 */
function recordsOf(resource: PgResource, $rows: Step<string>): PgSelectStep {
  // $rows is a pending mutation's token: the statement's rows (jsonb) replace it (withPendingMutation). Bound as
  // it is, never encoded (withPendingMutation finds the token among the values), and cast to jsonb, its type.
  const codec = resource.codec as PgCodecWithAttributes;
  const $select = pgSelect({
    resource,
    identifiers: [],
    // The rows as a placeholder of the select, not a from-expression step: a plain bind value, so the
    // statement's text is built once per plan and reused (a from-expression step is SQL built per request).
    from: {
      callback: ($root) =>
        sql`jsonb_populate_recordset(null::${codec.sqlType}, ${($root as PgSelectStep).placeholder($rows, TYPES.jsonb, true)})`,
    },
    name: "records",
  }) as PgSelectStep;
  const rowsPlaceholder = $select.placeholder($rows, TYPES.jsonb, true);
  // Not `with ordinality`: the row type of the alias must stay the table's (computed fields take it).
  const returnedKeys = sql`array(select ${pkJsonSql(resource, (a) => sql`__e -> ${sql.literal(a)}`)} from jsonb_array_elements(${rowsPlaceholder}) as __e)`;
  $select.orderBy({
    fragment: sql`array_position(${returnedKeys}, ${pkJsonSql(resource, (a) => sql`${$select.alias}.${sql.identifier(a)}`)})`,
    codec: TYPES.int,
    direction: "ASC",
  });
  return $select;
}

/** Plan-time facts of one mutation field: how its `records` and `affectedCount` are read, when they are. */
interface MutationPlan {
  resource: PgResource;
  /** The root field's name, to find its selections in the operation. */
  fieldName: string;
  /** The table type's fields that are plain columns (pgGqlReturnedRows). */
  columnFields: ReadonlySet<string>;
  /** Whether the records need the records select (decided once, from the operation, by the first to ask). */
  viaSelect?: boolean;
  $records?: PgSelectStep;
  /** The columns answered from the returned rows (none when nothing reads them, or only their count). */
  returned: ReturnedColumns;
  /** The statement's answer, fixed at the first execution (planning has ended). */
  answer?: Answer;
}
const mutationPlans = new WeakMap<Step, MutationPlan>();

/** The plan of a mutation step, its way of reading the records decided. */
function readingPlan($mutation: Step): MutationPlan & { viaSelect: boolean } {
  const plan = mutationPlans.get($mutation);
  if (!plan) throw new Error("Not a pg_graphql mutation step");
  plan.viaSelect ??= !recordsSelectOnly($mutation.operationPlan, plan.fieldName, plan.columnFields);
  return plan as MutationPlan & { viaSelect: boolean };
}

/**
 * The records select of a mutation field (one per field): it runs the pending mutation as its
 * leading CTE, so writing and reading the records cost one statement.
 */
function recordsSelectFor($mutation: Step, plan: MutationPlan): PgSelectStep {
  // Through `access`, not the side effect step itself: the records select then shares its
  // relations' implicit side effect, so @dataplan/pg inlines them into the one statement.
  return (plan.$records ??= recordsOf(plan.resource, access($mutation, "token") as Step<string>));
}

/** A mutation's `records`: from the rows its statement returned when they are plain columns, else by the records select. */
function recordsFor($mutation: Step): Step {
  const plan = readingPlan($mutation);
  if (plan.viaSelect) return recordsSelectFor($mutation, plan);
  return returnedRecords(access($mutation, "rows"), plan.returned);
}

/** A mutation's `affectedCount`: the number of its records. */
function affectedCountFor($mutation: Step): Step<number> {
  const plan = readingPlan($mutation);
  const $rows = plan.viaSelect ? recordsSelectFor($mutation, plan).items() : access($mutation, "rows");
  return lambda($rows, (rows) => (rows as unknown[]).length, true);
}

/** The statement's answer for a plan whose planning has ended. */
function answerOf(plan: MutationPlan): Answer {
  if (plan.viaSelect) return { columns: null, key: "select" };
  return { columns: plan.returned, key: JSON.stringify(plan.returned.names) };
}

/** A mutation answered from its returned rows: runs now, its rows (the answered columns' texts) as the step's value. */
async function runReturning(client: PgClient, mutation: PendingMutation): Promise<readonly unknown[][]> {
  const query = { text: mutation.text, values: mutation.values as unknown[], arrayMode: true };
  const { rows } = await client.query<unknown[]>(query).catch((e: unknown) => {
    throw tooManyError(e);
  });
  return rows;
}

/**
 * A mutation field's step: validates the input and prepares the statement (`build`); it runs now and answers its
 * returned rows, or waits in the request's registry for its records select (see `recordsFor`).
 */
function mutationStep<const TSpec extends Record<string, Step>>(
  resource: PgResource,
  field: { info: FieldInfo; columnFields: ReadonlySet<string> },
  spec: TSpec,
  build: (values: { [K in keyof TSpec]: unknown }, answer: Answer) => PendingMutation,
): Step<{ token: string | null; rows: readonly unknown[][] | null }> {
  const codec = resource.codec as PgCodecWithAttributes;
  const plan: MutationPlan = {
    resource,
    fieldName: field.info.fieldName,
    columnFields: field.columnFields,
    returned: { codec, names: [] },
  };
  const $mutation = sideEffectWithPgClient(resource.executor, spec as never, async (client, values) => {
    const answer = (plan.answer ??= answerOf(plan));
    const mutation = build(values as never, answer);
    if (answer.columns !== null) return { token: null, rows: await runReturning(client, mutation) };
    const aware = client as Partial<MutationAwareClient>;
    if (!aware.pendMutation) throw new Error("pg_graphql mutations need the request's mutation-aware client");
    return { token: aware.pendMutation(mutation), rows: null };
  }) as unknown as Step<{ token: string | null; rows: readonly unknown[][] | null }>;
  mutationPlans.set($mutation, plan);
  return $mutation;
}

/**
 * A mutation's target alias, and its RETURNING clause: the columns the role may read (as pg_graphql returns them, so
 * RETURNING asks for the same privileges and RLS policies whatever is selected), built once per schema.
 */
const MUTATION_ALIAS = sql.identifier("__t");
function returningSql(codec: PgCodecWithAttributes): SQL {
  const readable = readableColumns(codec);
  if (readable.length === 0) return sql`returning null`;
  return sql`returning ${sql.join(
    readable.map((name) => sql`${MUTATION_ALIAS}.${sql.identifier(name)}`),
    ", ",
  )}`;
}

/**
 * An insert's, update's or delete's statement text, kept per shape (the columns it writes, which values are
 * defaults, `atMost`, the filter's structure): its values are the request's column texts, then its filter's
 * operands in the order the text binds them.
 */
interface KeptDml {
  text: string;
  /** For each value after the column texts, the index of the filter operand it is. */
  operandAt: number[];
  /** The statements joined with this text (PendingMutation's `joined`). */
  joined: Map<string, string>;
}

/** Statement texts kept per mutation field of a schema: a burst of new shapes starts over. */
const MAX_DML_SHAPES = 100;

/**
 * The statement of `shape` (null: not to be kept) with these column texts and filter operands: the kept text
 * with this request's values, or built and, when it binds exactly those values, kept.
 */
function keptOrBuilt(
  kept: Map<string, KeptDml>,
  shape: string | null,
  texts: unknown[],
  operands: readonly FilterOperand[],
  build: () => PendingMutation,
): PendingMutation {
  const hit = shape === null ? undefined : kept.get(shape);
  if (hit !== undefined) {
    return {
      text: hit.text,
      joined: hit.joined,
      values: [...texts, ...hit.operandAt.map((i) => operands[i])],
    };
  }
  const statement = build();
  if (shape !== null) {
    const n = texts.length;
    const operandAt = statement.values.slice(n).map((v) => operands.indexOf(v as FilterOperand));
    if (statement.values.slice(0, n).every((v, i) => v === texts[i]) && !operandAt.includes(-1)) {
      if (kept.size >= MAX_DML_SHAPES) kept.clear();
      kept.set(shape, { text: statement.text, operandAt, joined: statement.joined });
    }
  }
  return statement;
}

function insertPlan(build: GraphileBuild.Build, resource: PgResource) {
  const codec = resource.codec as PgCodecWithAttributes;
  const columns = writableColumns(build, codec, "insert");
  const returning = returningSql(codec);
  const columnFields = plainColumnFields(build, codec);
  const target = sql`${resource.from as SQL} as ${MUTATION_ALIAS}`;
  const kept = new Map<string, KeptDml>();
  // The last statement by its `objects` value: a literal list is the same object in every request of a
  // document, so its statement is read once (values from variables are new objects each time). The statement
  // is only read later (its values are copied, never changed).
  let last: { objects: unknown; answer: Answer; statement: PendingMutation } | null = null;
  return (_$root: Step, fieldArgs: FieldArgs, info: FieldInfo) =>
    mutationStep(
      resource,
      { info, columnFields },
      { objects: fieldArgs.getRaw("objects") },
      ({ objects }, answer) => {
        // Only a list with a row is kept (an empty one throws), so an equal value is that very object.
        if (last !== null && last.objects === objects && last.answer === answer) return last.statement;
        const statement = insertStatement(objects, answer);
        last = { objects, answer, statement };
        return statement;
      },
    );

  function insertStatement(objects: unknown, answer: Answer): PendingMutation {
    const list = ((Array.isArray(objects) ? objects : [objects]) as Record<string, unknown>[]).filter(
      (o) => o != null,
    );
    if (list.length === 0) throw new PgGqlError("At least one record must be provided to objects");
    const used = [...columns].filter(([field]) => list.some((o) => o[field] !== undefined));
    // The text depends only on the columns given and which values are defaults: built once per such
    // shape, the values (each a bind parameter, in row and column order) read per request.
    const values: unknown[] = [];
    let shape = `${answer.key}\n${used.map(([field]) => field).join(",")}`;
    for (const o of list) {
      shape += "|";
      for (const [field, attributeName] of used) {
        if (o[field] === undefined) shape += "d";
        else {
          shape += "v";
          values.push(valueText(codec.attributes[attributeName], o[field]));
        }
      }
    }
    return keptOrBuilt(kept, shape, values, [], () => {
      // Built from the values read above, in the same order.
      let next = 0;
      const insert = used.length
        ? sql`insert into ${target} (${sql.join(
            used.map(([, attributeName]) => sql.identifier(attributeName)),
            ", ",
          )}) values ${sql.join(
            list.map(
              (o) =>
                sql`(${sql.join(
                  used.map(([field, attributeName]) =>
                    o[field] === undefined
                      ? sql`default`
                      : boundValueSql(codec.attributes[attributeName], values[next++]),
                  ),
                  ", ",
                )})`,
            ),
            ", ",
          )} ${returning}`
        : // No column given: every row takes its defaults.
          sql`insert into ${target} select from generate_series(1, ${sql.literal(list.length)}) ${returning}`;
      return mutationStatement(codec, insert, null, "insert", answer);
    });
  }
}

function updatePlan(build: GraphileBuild.Build, resource: PgResource) {
  const codec = resource.codec as PgCodecWithAttributes;
  const columns = writableColumns(build, codec, "update");
  const returning = returningSql(codec);
  const columnFields = plainColumnFields(build, codec);
  const kept = new Map<string, KeptDml>();
  return (_$root: Step, fieldArgs: FieldArgs, info: FieldInfo) =>
    mutationStep(
      resource,
      { info, columnFields },
      {
        set: fieldArgs.getRaw("set"),
        atMost: fieldArgs.getRaw("atMost"),
        applyFilter: filterApplyStep(fieldArgs),
      },
      ({ set, atMost, applyFilter }, answer) => {
        const values = (set ?? {}) as Record<string, unknown>;
        const used = [...columns].filter(([field]) => values[field] !== undefined);
        if (used.length === 0) {
          throw new PgGqlError("At least one mapping must be provided to set argument");
        }
        const setTexts = used.map(([field, attributeName]) =>
          valueText(codec.attributes[attributeName], values[field]),
        );
        const filter = applyFilterValue(applyFilter as ApplyFilter, MUTATION_ALIAS);
        const shape =
          filter.key === null
            ? null
            : `${answer.key}\n${String(atMost)}|${used.map(([field]) => field).join(",")}|${filter.key}`;
        return keptOrBuilt(kept, shape, setTexts, filter.operands, () => {
          const assignments = used.map(
            ([, attributeName], i) =>
              sql`${sql.identifier(attributeName)} = ${boundValueSql(codec.attributes[attributeName], setTexts[i])}`,
          );
          const dml = sql`update ${resource.from as SQL} as ${MUTATION_ALIAS} set ${sql.join(assignments, ", ")} where ${filterSql(filter, MUTATION_ALIAS)} ${returning}`;
          return mutationStatement(codec, dml, atMost as number, "update", answer);
        });
      },
    );
}

function deletePlan(build: GraphileBuild.Build, resource: PgResource) {
  const codec = resource.codec as PgCodecWithAttributes;
  const returning = returningSql(codec);
  const columnFields = plainColumnFields(build, codec);
  const kept = new Map<string, KeptDml>();
  return (_$root: Step, fieldArgs: FieldArgs, info: FieldInfo) =>
    mutationStep(
      resource,
      { info, columnFields },
      { atMost: fieldArgs.getRaw("atMost"), applyFilter: filterApplyStep(fieldArgs) },
      ({ atMost, applyFilter }, answer) => {
        const filter = applyFilterValue(applyFilter as ApplyFilter, MUTATION_ALIAS);
        const shape = filter.key === null ? null : `${answer.key}\n${String(atMost)}|${filter.key}`;
        return keptOrBuilt(kept, shape, [], filter.operands, () => {
          const dml = sql`delete from ${resource.from as SQL} as ${MUTATION_ALIAS} where ${filterSql(filter, MUTATION_ALIAS)} ${returning}`;
          return mutationStatement(codec, dml, atMost as number, "delete", answer);
        });
      },
    );
}

function registerResponseType(build: GraphileBuild.Build, resource: PgResource, kind: MutationKind): void {
  const { inflection, graphql } = build;
  const { GraphQLNonNull, GraphQLList, GraphQLInt } = graphql;
  const tableTypeName = inflection.tableType(resource.codec);
  const typeName = inflection.pgGqlMutationResponseType(tableTypeName, kind);
  if (build.getTypeMetaByName(typeName)) return;
  build.registerObjectType(
    typeName,
    { isPgGqlMutationResponse: true, pgCodec: resource.codec },
    () => ({
      fields: () => ({
        affectedCount: {
          description: "Count of the records impacted by the mutation",
          type: new GraphQLNonNull(GraphQLInt),
          plan: ($mutation: Step) => affectedCountFor($mutation),
        },
        records: {
          description: "Array of records impacted by the mutation",
          type: new GraphQLNonNull(
            new GraphQLList(new GraphQLNonNull(build.getOutputTypeByName(tableTypeName))),
          ) as GraphQLOutputType,
          plan: ($mutation: Step) => recordsFor($mutation),
        },
      }),
    }),
    `pg_graphql ${kind} response for ${tableTypeName}`,
  );
}

const AT_MOST_DESCRIPTION = "The maximum number of records in the collection permitted to be affected";
const FILTER_DESCRIPTION = "Restricts the mutation's impact to records matching the criteria";

/**
 * pg_graphql's mutations: `insertInto<T>Collection(objects)`, `update<T>Collection(set, filter,
 * atMost)` and `deleteFrom<T>Collection(filter, atMost)` per the role's privileges, each answering
 * `affectedCount` and `records`. One statement per mutation (the DML is its leading CTE; records of plain
 * columns are read from its returned rows, others by the records select it is prepended to, see `mutationStatement`),
 * in the request's transaction; past `atMost` it fails and nothing changes. Insert and update inputs leave out serial, identity and generated columns, as pg_graphql
 * does; every input field is nullable.
 */
export const PgGqlMutationsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlMutationsPlugin",
  description: "pg_graphql insert, update and delete mutations",
  version: "0.1.0",
  after: ["PgAttributesPlugin", "PgTablesPlugin", "PgGqlFilterPlugin", "PgGqlNodePlugin"],
  inflection: {
    add: {
      pgGqlInsertField(_options, typeName) {
        return `insertInto${typeName}Collection`;
      },
      pgGqlUpdateField(_options, typeName) {
        return `update${typeName}Collection`;
      },
      pgGqlDeleteField(_options, typeName) {
        return `deleteFrom${typeName}Collection`;
      },
      pgGqlMutationResponseType(_options, typeName, kind) {
        const suffix = { insert: "InsertResponse", update: "UpdateResponse", delete: "DeleteResponse" }[kind];
        return `${typeName}${suffix}`;
      },
    },
  },
  grafast: {
    middleware: {
      // Every query of a request goes through a client that holds the request's pending mutations.
      async prepareArgs(next, event) {
        const args = await next();
        // Only a mutation pends statements: a query's client stays as it is.
        if (!isMutationOperation(args.document, args.operationName)) return args;
        withMutationAwareClients(
          args.contextValue as unknown as Record<string, unknown>,
          args.resolvedPreset?.pgServices ?? event.args.resolvedPreset?.pgServices ?? [],
        );
        return args;
      },
    },
  },
  gather: {
    hooks: {
      async pgCodecs_attribute(info, { serviceName, pgAttribute, attribute }) {
        const { introspection } = await info.helpers.pgIntrospection.getService(serviceName);
        const write: ColumnInputInfo = {};
        const attr = pgAttribute as PgAttribute;
        if (
          attr.attidentity ||
          serialColumns(introspection as never).has(`${attr.attrelid}:${attr.attnum}`)
        ) {
          write.serial = true;
        }
        if (attr.attgenerated) write.generated = true;
        const typname = attr.getType()?.typname;
        if (typname && CHARACTER_TYPES.has(typname) && attr.atttypmod != null && attr.atttypmod > 4) {
          write.maxLength = attr.atttypmod - 4;
        }
        attribute.extensions = { ...attribute.extensions, pgGqlColumn: write } as typeof attribute.extensions;
      },
    },
  },
  schema: {
    behaviorRegistry: {
      add: {
        "resource:insert": {
          description: "insertInto<T>Collection for this table",
          entities: ["pgResource"],
        },
        "resource:update": { description: "update<T>Collection for this table", entities: ["pgResource"] },
        "resource:delete": {
          description: "deleteFrom<T>Collection for this table",
          entities: ["pgResource"],
        },
      },
    },
    entityBehavior: {
      pgResource: {
        inferred: {
          provides: ["default"],
          before: ["inferred", "override"],
          // Defaults first: grants (PgRBACPlugin) and view updatability (PgTablesPlugin) take them away.
          callback(behavior, resource) {
            const isTable =
              !resource.parameters && Boolean(resource.codec.attributes) && !resource.codec.isAnonymous;
            return isTable ? ["resource:insert", "resource:update", "resource:delete", behavior] : behavior;
          },
        },
      },
      pgCodecAttribute: {
        inferred: {
          after: ["inferred"],
          provides: ["pgGqlMutations"],
          callback(behavior, [codec, attributeName]) {
            const { serial, generated } = columnInputInfo(codec.attributes[attributeName]);
            return serial || generated ? [behavior, "-attribute:insert", "-attribute:update"] : behavior;
          },
        },
      },
    },
    hooks: {
      init(_, build) {
        for (const resource of nodeResources(build)) {
          for (const kind of ["insert", "update", "delete"] as const)
            registerResponseType(build, resource, kind);
        }
        return _;
      },
      GraphQLObjectType(config, _build, context) {
        if (!context.scope.isPgClassType) return config;
        // A mutation's records may be rows it returned (pgGqlReturnedRows).
        return { ...config, assertStep: acceptingReturnedRows(config.assertStep) };
      },
      GraphQLInputObjectType(config, _build, context) {
        const { isInputType, isPgPatch, isPgRowType } = context.scope;
        if (!isPgRowType || (!isInputType && !isPgPatch)) return config;
        return { ...config, description: undefined };
      },
      GraphQLInputObjectType_fields(fields, build, context) {
        const { isInputType, isPgPatch, isPgRowType } = context.scope;
        if (!isPgRowType || (!isInputType && !isPgPatch)) return fields;
        // pg_graphql cannot see through triggers and defaults: every input field is nullable.
        return Object.fromEntries(
          Object.entries(fields).map(([name, field]) => [
            name,
            {
              ...field,
              description: undefined,
              type: build.graphql.getNullableType(field.type) as GraphQLInputType,
            },
          ]),
        );
      },
      GraphQLObjectType_fields(fields, build, context) {
        if (!context.scope.isRootMutation) return fields;
        const { inflection, graphql } = build;
        const { GraphQLNonNull, GraphQLList, GraphQLInt } = graphql;
        const out = { ...fields };
        for (const resource of nodeResources(build)) {
          const codec = resource.codec as PgCodecWithAttributes;
          const typeName = inflection.tableType(codec);
          if (!build.getTypeMetaByName(typeName)) continue;
          const Filter = build.getInputTypeByName(inflection.pgGqlFilterType(typeName));
          const filterArg = { type: Filter, description: FILTER_DESCRIPTION };
          const atMostArg = {
            type: new GraphQLNonNull(GraphQLInt),
            defaultValue: 1,
            description: AT_MOST_DESCRIPTION,
          };
          const matches = (behavior: keyof GraphileBuild.BehaviorStrings) =>
            build.behavior.pgResourceMatches(resource, behavior);
          if (matches("resource:insert") && writableColumns(build, codec, "insert").size > 0) {
            const InsertInput = build.getGraphQLTypeByPgCodec(codec, "input") as GraphQLInputType;
            out[inflection.pgGqlInsertField(typeName)] = {
              description: `Adds one or more \`${typeName}\` records to the collection`,
              type: build.getOutputTypeByName(inflection.pgGqlMutationResponseType(typeName, "insert")),
              args: {
                objects: {
                  type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(InsertInput))),
                },
              },
              plan: insertPlan(build, resource) as never,
            };
          }
          if (matches("resource:update") && writableColumns(build, codec, "update").size > 0) {
            const UpdateInput = build.getGraphQLTypeByPgCodec(codec, "patch") as GraphQLInputType;
            out[inflection.pgGqlUpdateField(typeName)] = {
              description: `Updates zero or more records in the \`${typeName}\` collection`,
              type: new GraphQLNonNull(
                build.getOutputTypeByName(inflection.pgGqlMutationResponseType(typeName, "update")),
              ),
              args: {
                set: {
                  type: new GraphQLNonNull(UpdateInput),
                  description: "Fields that are set will be updated for all records matching the `filter`",
                },
                filter: filterArg,
                atMost: atMostArg,
              },
              plan: updatePlan(build, resource) as never,
            };
          }
          if (matches("resource:delete")) {
            out[inflection.pgGqlDeleteField(typeName)] = {
              description: `Deletes zero or more records from the \`${typeName}\` collection`,
              type: new GraphQLNonNull(
                build.getOutputTypeByName(inflection.pgGqlMutationResponseType(typeName, "delete")),
              ),
              args: { filter: filterArg, atMost: atMostArg },
              plan: deletePlan(build, resource) as never,
            };
          }
        }
        return out;
      },
    },
  },
};
