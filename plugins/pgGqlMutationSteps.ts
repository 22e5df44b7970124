import {
  pgSelect,
  sideEffectWithPgClient,
  TYPES,
  type PgCodecWithAttributes,
  type PgResource,
  type PgSelectStep,
} from "@dataplan/pg";
import { access, lambda, type FieldInfo, type Step } from "grafast";
import { sql, type SQL } from "pg-sql2";
import type { MutationStatement } from "./pgGqlKeptStatements";
import type { Answer } from "./pgGqlMutationSql";
import { primaryKeyAttributes } from "./pgGqlNodeId";
import { runReturning, type MutationAwareClient } from "./pgGqlPendingMutations";
import { recordsSelectOnly, returnedRecords, type ReturnedColumns } from "./pgGqlReturnedRows";

/**
 * A mutation field's step and how its `records` and `affectedCount` are read: from the rows its statement
 * returned when every selection of them is plain columns (pgGqlReturnedRows), else by a records select the
 * statement is prepended to (pgGqlPendingMutations).
 */

function pkJsonSql(resource: PgResource, column: (name: string) => SQL): SQL {
  return sql`jsonb_build_array(${sql.join(primaryKeyAttributes(resource).map(column), ", ")})`;
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
export function recordsFor($mutation: Step): Step {
  const plan = readingPlan($mutation);
  if (plan.viaSelect) return recordsSelectFor($mutation, plan);
  return returnedRecords(access($mutation, "rows"), plan.returned);
}

/** A mutation's `affectedCount`: the number of its records. */
export function affectedCountFor($mutation: Step): Step<number> {
  const plan = readingPlan($mutation);
  const $rows = plan.viaSelect ? recordsSelectFor($mutation, plan).items() : access($mutation, "rows");
  return lambda($rows, (rows) => (rows as unknown[]).length, true);
}

/** The statement's answer for a plan whose planning has ended. */
function answerOf(plan: MutationPlan): Answer {
  if (plan.viaSelect) return { columns: null, key: "select" };
  return { columns: plan.returned, key: JSON.stringify(plan.returned.names) };
}

/**
 * A mutation field's step: validates the input and prepares the statement (`build`); it runs now and answers its
 * returned rows, or waits in the request's registry for its records select (see `recordsFor`).
 */
export function mutationStep<const TSpec extends Record<string, Step>>(
  resource: PgResource,
  field: { info: FieldInfo; columnFields: ReadonlySet<string> },
  spec: TSpec,
  build: (values: { [K in keyof TSpec]: unknown }, answer: Answer) => MutationStatement,
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
