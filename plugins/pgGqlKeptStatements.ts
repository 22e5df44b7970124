import { sql, type SQL } from "pg-sql2";
import type { FilterOperand } from "./pgGqlFilterOperands";
import type { Answer } from "./pgGqlMutationSql";
import { replacePlaceholders } from "./pgGqlPlaceholders";

/**
 * Mutation statement texts kept across requests: a mutation's text per shape (what it writes, not the values),
 * and the text of a mutation joined with its records statement, so the same operation sends the same string
 * every time (compiled once; the same string keeps its hash for the prepared statement's name).
 */

/** A mutation's compiled statement (pgGqlMutationSql's `mutationStatementSql`). */
export interface MutationStatement {
  /** `with __pgGqlAffected as (<dml>) ...`, compiled. */
  text: string;
  values: readonly unknown[];
  /** The joined statements made with this text so far, by the records statement's text (see joinedText). */
  joined: Map<string, string>;
}

/**
 * An insert's, update's or delete's statement text, kept per shape (see the `*Shape` functions): its values are
 * the request's column texts, then its filter's operands in the order the text binds them.
 */
interface KeptText {
  text: string;
  /** For each value after the column texts, the index of the filter operand it is. */
  operandAt: number[];
  /** The statements joined with this text (MutationStatement's `joined`). */
  joined: Map<string, string>;
}

/** The statement texts of one mutation field of a schema, by shape. */
export type KeptTexts = Map<string, KeptText>;

/** Statement texts kept per mutation field of a schema: a burst of new shapes starts over. */
const MAX_SHAPES = 100;

/** An insert's shape: the columns given and, per row, which values are defaults (`d`) or bound (`v`). */
export function insertShape(
  answer: Answer,
  fields: readonly string[],
  rows: readonly (readonly unknown[])[],
): string {
  const given = rows.map((row) => `|${row.map((text) => (text === undefined ? "d" : "v")).join("")}`);
  return `${answer.key}\n${fields.join(",")}${given.join("")}`;
}

/** An update's shape (null: not to be kept): `atMost`, the columns set and the filter's structure. */
export function updateShape(
  answer: Answer,
  atMost: unknown,
  fields: readonly string[],
  filterKey: string | null,
): string | null {
  return filterKey === null ? null : `${answer.key}\n${String(atMost)}|${fields.join(",")}|${filterKey}`;
}

/** A delete's shape (null: not to be kept): `atMost` and the filter's structure. */
export function deleteShape(answer: Answer, atMost: unknown, filterKey: string | null): string | null {
  return filterKey === null ? null : `${answer.key}\n${String(atMost)}|${filterKey}`;
}

/**
 * The statement of `shape` (null: not to be kept) with these column texts and filter operands: the kept text
 * with this request's values, or built and, when it binds exactly those values, kept.
 */
export function keptOrBuilt(
  kept: KeptTexts,
  shape: string | null,
  texts: readonly unknown[],
  operands: readonly FilterOperand[],
  build: () => SQL,
): MutationStatement {
  const hit = shape === null ? undefined : kept.get(shape);
  if (hit !== undefined) {
    return {
      text: hit.text,
      joined: hit.joined,
      values: [...texts, ...hit.operandAt.map((i) => operands[i])],
    };
  }
  const { text, values } = sql.compile(build());
  const statement: MutationStatement = { text, values, joined: new Map() };
  if (shape !== null) {
    const n = texts.length;
    const operandAt = statement.values.slice(n).map((v) => operands.indexOf(v as FilterOperand));
    if (values.slice(0, n).every((v, i) => v === texts[i]) && !operandAt.includes(-1)) {
      if (kept.size >= MAX_SHAPES) kept.clear();
      kept.set(shape, { text, operandAt, joined: statement.joined });
    }
  }
  return statement;
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
 * A mutation's text followed by its records statement's (whose values at `tokenAt` stand for the mutation's
 * rows), kept with the mutation's text: the same operation sends the same records statement every time.
 */
export function joinedText(
  mutation: MutationStatement,
  records: string,
  count: number,
  tokenAt: ReadonlySet<number>,
): string {
  let text = mutation.joined.get(records);
  if (text === undefined) {
    text = mutation.text + recordsText(records, count, tokenAt, mutation.values.length);
    if (mutation.joined.size >= MAX_JOINED) mutation.joined.clear();
    mutation.joined.set(records, text);
  }
  return text;
}
