import { PgCondition, type PgSelectQueryBuilder } from "@dataplan/pg";
import { applyInput, operationPlan, UnbatchedStep, type FieldArgs, type Step } from "grafast";
import { sql, type SQL } from "pg-sql2";

/**
 * A filter's operands are bound parameters, never SQL text: two requests whose filters have the same
 * structure (the same columns, operators, `and`/`or`/`not` nesting and null operands) compile to the same
 * statement text and differ only in their operands, so PostgreSQL plans it once per connection (a prepared
 * statement), and an update's or delete's statement text is kept per structure (pgGqlKeptStatements).
 */

/**
 * One operand of a filter, as the text (or text array) PostgreSQL casts to the column's type. An object, so
 * a statement kept for reuse can find where in its values each operand of the first request went; pg sends
 * it as its text (`toPostgres`).
 */
export class FilterOperand {
  constructor(readonly text: string | (string | null)[]) {}
  toPostgres(): string | (string | null)[] {
    return this.text;
  }
  /** @dataplan/pg keys a batch's statements by their values' JSON. */
  toJSON(): string | (string | null)[] {
    return this.text;
  }
}

/** The operands made while a filter is applied (see `applyFilterValue`), in the order its fields made them. */
let collected: FilterOperand[] | null = null;

/** A filter operand as SQL: a bound parameter cast to `type`, recorded when a filter is being applied. */
export function operandSql(text: string | (string | null)[], type: SQL): SQL {
  const operand = new FilterOperand(text);
  collected?.push(operand);
  return sql`${sql.value(operand as never)}::${type}`;
}

export type ApplyFilter = ((collector: unknown) => void) | null | undefined;

/** A filter value applied: its conditions, their operands, and the key of their structure. */
export interface AppliedFilter {
  conditions: SQL[];
  /** The conditions' compiled text; null when something else than its operands is bound in them. */
  key: string | null;
  /** The operands, in the order the filter's fields made them. */
  operands: FilterOperand[];
}

/**
 * Applies a `<T>Filter` value (grafast's `applyInput` callback, which runs the filter fields' `apply`) to a
 * collector of conditions rather than to a query: the conditions, their operands and the key of their
 * structure come out.
 */
export function applyFilterValue(applyFilter: ApplyFilter, alias: SQL): AppliedFilter {
  const conditions: SQL[] = [];
  const operands: FilterOperand[] = [];
  const outer = collected;
  collected = operands;
  try {
    applyFilter?.({ alias, where: (condition: SQL) => conditions.push(condition) });
  } finally {
    collected = outer;
  }
  const compiled = sql.compile(sql.join(conditions, " and "));
  // A value that is not one of this filter's operands would stay in a kept statement: no key then.
  const onlyOperands = compiled.values.every((v) => operands.includes(v as never));
  return { conditions, key: onlyOperands ? `${operands.length}:${compiled.text}` : null, operands };
}

/** A select's filter condition: adds the filter's conditions when the select builds its statement. */
export type BoundFilter = (queryBuilder: PgSelectQueryBuilder) => void;

/** A filter value applied once per request, for a select to add when it builds its statement. */
function boundFilter(applyFilter: ApplyFilter, alias: SQL): BoundFilter | null {
  if (applyFilter == null) return null;
  const { conditions } = applyFilterValue(applyFilter, alias);
  return (queryBuilder) => {
    for (const condition of conditions) queryBuilder.where(condition);
  };
}

/**
 * Whether two coerced input values are the same value: equal leaves, and lists and input objects with the
 * same entries. Anything else (an object a scalar parsed into) is the same only when it is the same object.
 */
function sameInputValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item, i) => sameInputValue(item, b[i]));
  }
  // Input objects are made with a null prototype (grafast, graphql-js); a scalar's own object is not one.
  if (Object.getPrototypeOf(a) !== null || Object.getPrototypeOf(b) !== null) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  return keys.every((key) => key in y && sameInputValue(x[key], y[key]));
}

/** A select's `filter` argument: applied at run time, once per request, as a bound filter (boundFilter). */
class PgGqlFilterStep extends UnbatchedStep<BoundFilter | null> {
  static override $$export = { moduleName: "strata", exportName: "PgGqlFilterStep" };
  override isSyncAndSafe = true;

  constructor(
    $apply: Step<ApplyFilter>,
    $value: Step,
    private readonly alias: SQL,
  ) {
    super();
    this.addUnaryDependency($apply);
    this.addUnaryDependency($value);
  }

  /** The last filter value applied, and what it gave. */
  private last: { applyFilter: ApplyFilter; value: unknown; bound: BoundFilter | null } | null = null;

  unbatchedExecute(_extra: unknown, applyFilter: ApplyFilter, value: unknown): BoundFilter | null {
    // The callback applies the value and nothing else: a value applied last time gives the same conditions.
    // A filter written in the document is the same value on every request, and grafast makes its callback
    // anew per request unless the whole value is a constant; one from variables is usually a new value.
    const last = this.last;
    if (last !== null && (last.applyFilter === applyFilter || sameInputValue(last.value, value)))
      return last.bound;
    const bound = boundFilter(applyFilter, this.alias);
    this.last = { applyFilter, value, bound };
    return bound;
  }
}

/** grafast's `applyInput` step of a field's `filter` argument: a callback that applies the value to a collector. */
export function filterApplyStep(fieldArgs: FieldArgs): Step<ApplyFilter> {
  return applyInput(
    fieldArgs.typeAt("filter") as never,
    fieldArgs.getRaw("filter") as never,
    // Created inside grafast's modifier scope: the condition adds itself to the collector when applied.
    (parent) => new PgCondition(parent as never),
  ) as unknown as Step<ApplyFilter>;
}

/** The step that applies a field's `filter` argument to the select whose alias is `alias`. */
export function filterStep(fieldArgs: FieldArgs, alias: SQL): Step<BoundFilter | null> {
  const $apply = filterApplyStep(fieldArgs);
  const $value = fieldArgs.getRaw("filter");
  // At the root, beside the applyInput step: a nested select whose steps all live there can be inlined.
  return operationPlan().withRootLayerPlan(() => new PgGqlFilterStep($apply, $value, alias));
}
