import {
  pgWhereConditionSpecListToSQL,
  type PgCodecAttribute,
  type PgCodecWithAttributes,
  type PgResource,
} from "@dataplan/pg";
import { sql, type SQL } from "pg-sql2";
import type { AppliedFilter } from "./pgGqlFilterOperands";
import { returnedColumnsSql, type ReturnedColumns } from "./pgGqlReturnedRows";

/**
 * The SQL of pg_graphql's mutations, as functions of a table, the request's input texts (pgGqlMutationInputs)
 * and its applied filter: every input is a bound text cast to its column's type, the DML returns the columns the
 * role may read and is the leading CTE of the mutation's one statement (`mutationStatementSql`).
 */

export type MutationKind = "insert" | "update" | "delete";

/**
 * What a mutation's statement answers: its rows as jsonb for the records select it is prepended to (`columns`
 * null), or these columns of the rows it returned (see pgGqlReturnedRows). `key` tells them apart in kept texts.
 */
export interface Answer {
  columns: ReturnedColumns | null;
  key: string;
}

/** A mutation's target alias: its filter is applied to this alias. */
export const MUTATION_ALIAS = sql.identifier("__t");

/** The alias of the rows a mutation's DML returned. */
const AFFECTED_ALIAS = sql.identifier("__r");

/** A table as its mutations write it: the aliased target and the RETURNING clause, built once per schema. */
export interface MutationTable {
  codec: PgCodecWithAttributes;
  target: SQL;
  returning: SQL;
}

export function mutationTable(resource: PgResource): MutationTable {
  const codec = resource.codec as PgCodecWithAttributes;
  return { codec, target: sql`${resource.from as SQL} as ${MUTATION_ALIAS}`, returning: returningSql(codec) };
}

/** The columns the role may read (RETURNING needs SELECT on each). */
function readableColumns(codec: PgCodecWithAttributes): string[] {
  return Object.entries(codec.attributes)
    .filter(
      ([, attribute]) => (attribute.extensions as { canSelect?: boolean } | undefined)?.canSelect !== false,
    )
    .map(([name]) => name);
}

/**
 * The RETURNING clause: the columns the role may read, as pg_graphql returns them, so RETURNING asks for the
 * same privileges and RLS policies whatever is selected.
 */
function returningSql(codec: PgCodecWithAttributes): SQL {
  const readable = readableColumns(codec);
  if (readable.length === 0) return sql`returning null`;
  return sql`returning ${sql.join(
    readable.map((name) => sql`${MUTATION_ALIAS}.${sql.identifier(name)}`),
    ", ",
  )}`;
}

/** A bound text cast to its column's type. */
function boundValueSql(attribute: PgCodecAttribute, text: unknown): SQL {
  return sql`(${sql.value(text as string)}::${attribute.codec.sqlType})`;
}

/** The WHERE condition of a mutation's applied `filter`. */
function filterSql(filter: AppliedFilter): SQL {
  return pgWhereConditionSpecListToSQL(MUTATION_ALIAS, filter.conditions) ?? sql.true;
}

/** An insert of `rows` into `columns`: per row, each column's bound text, or undefined for its default. */
export function insertSql(
  table: MutationTable,
  columns: readonly string[],
  rows: readonly (readonly unknown[])[],
): SQL {
  const { codec, target, returning } = table;
  if (columns.length === 0) {
    // No column given: every row takes its defaults.
    return sql`insert into ${target} select from generate_series(1, ${sql.literal(rows.length)}) ${returning}`;
  }
  const tuples = rows.map(
    (row) =>
      sql`(${sql.join(
        row.map((text, i) =>
          text === undefined ? sql`default` : boundValueSql(codec.attributes[columns[i]], text),
        ),
        ", ",
      )})`,
  );
  const names = sql.join(
    columns.map((name) => sql.identifier(name)),
    ", ",
  );
  return sql`insert into ${target} (${names}) values ${sql.join(tuples, ", ")} ${returning}`;
}

/** An update setting `columns` to their bound `texts` in the rows `filter` matches. */
export function updateSql(
  table: MutationTable,
  columns: readonly string[],
  texts: readonly unknown[],
  filter: AppliedFilter,
): SQL {
  const assignments = columns.map(
    (name, i) => sql`${sql.identifier(name)} = ${boundValueSql(table.codec.attributes[name], texts[i])}`,
  );
  return sql`update ${table.target} set ${sql.join(assignments, ", ")} where ${filterSql(filter)} ${table.returning}`;
}

/** A delete of the rows `filter` matches. */
export function deleteSql(table: MutationTable, filter: AppliedFilter): SQL {
  return sql`delete from ${table.target} where ${filterSql(filter)} ${table.returning}`;
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

/**
 * A mutation's statement: the DML as the leading CTE, then its answer. Past `atMost`, a one-row CTE of the
 * affected count raises; the rows' answer joins it, the records select reads it.
 */
export function mutationStatementSql(
  table: MutationTable,
  dml: SQL,
  atMost: number | null,
  kind: MutationKind,
  answer: Answer,
): SQL {
  // The function raises past `atMost`; within it, the comparison alone decides (no function call per statement).
  const limit =
    atMost === null
      ? sql.blank
      : sql`having count(*) <= ${sql.literal(atMost)} or _strata_graphql.at_most(${sql.literal(kind)}, count(*), ${sql.literal(atMost)})`;
  const affected = sql`with __pgGqlAffected as (${dml})`;
  if (answer.columns === null) {
    const rows = sql`coalesce(jsonb_agg(${rowJsonSql(table.codec, AFFECTED_ALIAS)}), '[]'::jsonb)`;
    return sql`${affected}, __pgGqlRows(__json) as (select ${rows} from __pgGqlAffected as ${AFFECTED_ALIAS} ${limit})`;
  }
  const columns = returnedColumnsSql(answer.columns, AFFECTED_ALIAS);
  return atMost === null
    ? sql`${affected} select ${columns} from __pgGqlAffected as ${AFFECTED_ALIAS}`
    : sql`${affected}, __pgGqlChecked as (select from __pgGqlAffected ${limit}) select ${columns} from __pgGqlAffected as ${AFFECTED_ALIAS}, __pgGqlChecked`;
}
