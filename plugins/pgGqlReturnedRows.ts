import type { PgCodecAttribute, PgCodecWithAttributes } from "@dataplan/pg";
import { lambda, Step, UnbatchedStep, type __ItemStep, type OperationPlan } from "grafast";
import { Kind, type FieldNode, type FragmentDefinitionNode, type SelectionSetNode } from "grafast/graphql";
import { sql, type SQL } from "pg-sql2";

/**
 * A mutation's `records` read straight from the rows its statement returns, as pg_graphql and stock PostGraphile
 * read them, when every selection of them is plain columns: no records select, which @dataplan/pg builds anew
 * for every request. Relations, nodeId and computed fields need the select (pgGqlMutationSteps' `recordsOf`).
 */

/** The columns a mutation field's statement answers, in its select's order: filled while the records are planned. */
export interface ReturnedColumns {
  codec: PgCodecWithAttributes;
  names: string[];
}

/** A column that is read as a value of its own (not a composite, not derived from another column or relation). */
function isPlainColumn(attribute: PgCodecAttribute): boolean {
  return !attribute.codec.attributes && !attribute.via && !attribute.identicalVia && !attribute.expression;
}

/** The GraphQL fields of a table type that are plain columns (their plans read `$record.get(column)`). */
export function plainColumnFields(build: GraphileBuild.Build, codec: PgCodecWithAttributes): Set<string> {
  const fields = new Set<string>();
  for (const [attributeName, attribute] of Object.entries(codec.attributes)) {
    if (!isPlainColumn(attribute)) continue;
    if (!build.behavior.pgCodecAttributeMatches([codec, attributeName], "attribute:select")) continue;
    fields.add(build.inflection.attribute({ codec, attributeName }));
  }
  return fields;
}

/**
 * The fields a selection set selects, its fragments spread. Directives are not read: a field `@skip` leaves out
 * still counts, which can only send a document to the records select.
 */
function* selectedFields(
  set: SelectionSetNode | undefined,
  fragments: Readonly<Record<string, FragmentDefinitionNode>>,
): Generator<FieldNode> {
  for (const selection of set?.selections ?? []) {
    if (selection.kind === Kind.FIELD) yield selection;
    else if (selection.kind === Kind.INLINE_FRAGMENT)
      yield* selectedFields(selection.selectionSet, fragments);
    else yield* selectedFields(fragments[selection.name.value]?.selectionSet, fragments);
  }
}

/**
 * Whether every `records` selected under root mutation field `mutationField` in the planned operation selects
 * only `columnFields` (and `__typename`). Read from the operation: a field's plan cannot see its selection set.
 */
export function recordsSelectOnly(
  operationPlan: OperationPlan,
  mutationField: string,
  columnFields: ReadonlySet<string>,
): boolean {
  const { operation, fragments } = operationPlan;
  for (const mutation of selectedFields(operation.selectionSet, fragments)) {
    if (mutation.name.value !== mutationField) continue;
    for (const records of selectedFields(mutation.selectionSet, fragments)) {
      if (records.name.value !== "records") continue;
      for (const field of selectedFields(records.selectionSet, fragments)) {
        const name = field.name.value;
        if (name !== "__typename" && !columnFields.has(name)) return false;
      }
    }
  }
  return true;
}

/** The answered columns of the rows at `alias`, each as @dataplan/pg selects a column (its codec's text form). */
export function returnedColumnsSql(returned: ReturnedColumns, alias: SQL): SQL {
  if (returned.names.length === 0) return sql.blank;
  return sql.join(
    returned.names.map((name) => {
      const attribute = returned.codec.attributes[name];
      const expression = sql`${alias}.${sql.identifier(name)}`;
      const { castFromPg } = attribute.codec;
      return castFromPg
        ? castFromPg(expression, Boolean(attribute.codec.notNull || attribute.notNull))
        : sql`(${expression})::text`;
    }),
    ", ",
  );
}

/** One returned row (its answered columns' texts): `get(column)` reads a column as its codec reads it. */
class ReturnedRowStep extends UnbatchedStep<readonly unknown[]> {
  static override $$export = { moduleName: "strata-pg-graphql", exportName: "ReturnedRowStep" };
  private readonly columns = new Map<string, Step>();

  constructor(
    $row: Step,
    private readonly returned: ReturnedColumns,
  ) {
    super();
    this.isSyncAndSafe = true;
    this.addDependency($row);
  }

  get(name: string): Step {
    let $column = this.columns.get(name);
    if ($column === undefined) {
      const attribute = this.returned.codec.attributes[name];
      if (!attribute || !isPlainColumn(attribute))
        throw new Error(`Not a plain column of the returned rows: ${name}`);
      let index = this.returned.names.indexOf(name);
      if (index < 0) index = this.returned.names.push(name) - 1;
      const { codec } = attribute;
      $column = lambda(this, (row) => (row[index] == null ? null : codec.fromPg(row[index] as string)), true);
      this.columns.set(name, $column);
    }
    return $column;
  }

  unbatchedExecute(_extra: unknown, row: readonly unknown[]): readonly unknown[] {
    return row;
  }
}

/** The returned rows (arrays of column texts) as a list whose items are `ReturnedRowStep`s. */
class ReturnedRowsStep extends UnbatchedStep<readonly (readonly unknown[])[]> {
  static override $$export = { moduleName: "strata-pg-graphql", exportName: "ReturnedRowsStep" };

  constructor(
    $rows: Step,
    private readonly returned: ReturnedColumns,
  ) {
    super();
    this.isSyncAndSafe = true;
    this.addDependency($rows);
  }

  listItem($item: __ItemStep<readonly unknown[]>): ReturnedRowStep {
    return new ReturnedRowStep($item, this.returned);
  }

  unbatchedExecute(_extra: unknown, rows: readonly (readonly unknown[])[]): readonly (readonly unknown[])[] {
    return rows;
  }
}

/** `records` read from the returned rows at `$rows`. */
export function returnedRecords($rows: Step, returned: ReturnedColumns): Step {
  return new ReturnedRowsStep($rows, returned);
}

type StepAssertion = ((step: Step) => void) | (abstract new (...args: never[]) => Step);

/**
 * A table type's step assertion (grafast checks it in development) that also accepts a returned row: the stock
 * one asks for one of @dataplan/pg's row steps.
 */
export function acceptingReturnedRows(assertStep: StepAssertion | null | undefined): (step: Step) => void {
  return (step) => {
    if (step instanceof ReturnedRowStep || !assertStep) return;
    if (assertStep.prototype instanceof Step || (assertStep as unknown) === Step) {
      if (!(step instanceof assertStep))
        throw new Error(`Expected a ${assertStep.name}, got ${String(step)}`);
    } else (assertStep as (step: Step) => void)(step);
  };
}
