import { sql, type SQL } from "pg-sql2";
import type { Field, Filter, IsTest, LogicTree } from "../request/grammar";

/** `alias."col"->'k'->>0`: a column with its JSON path. */
export function fieldSql(alias: string, field: Field): SQL {
  let expr = sql.identifier(alias, field.name);
  for (const step of field.path) {
    const key = step.index ? sql.literal(Number(step.key)) : sql.literal(step.key);
    expr = step.arrow === "->" ? sql`(${expr} -> ${key})` : sql`(${expr} ->> ${key})`;
  }
  return expr;
}

// Operators as fixed SQL fragments: nothing of the request reaches the SQL text.
const COMPARISONS: Record<string, SQL> = {
  eq: sql`=`,
  neq: sql`<>`,
  gt: sql`>`,
  gte: sql`>=`,
  lt: sql`<`,
  lte: sql`<=`,
  like: sql`like`,
  ilike: sql`ilike`,
  match: sql`~`,
  imatch: sql`~*`,
  cs: sql`@>`,
  cd: sql`<@`,
  ov: sql`&&`,
  sl: sql`<<`,
  sr: sql`>>`,
  nxl: sql`&>`,
  nxr: sql`&<`,
  adj: sql`-|-`,
};

const TEXT_OPERATORS = new Set(["like", "ilike", "match", "imatch"]);
const FTS: Record<string, SQL> = {
  fts: sql`to_tsquery`,
  plfts: sql`plainto_tsquery`,
  phfts: sql`phraseto_tsquery`,
  wfts: sql`websearch_to_tsquery`,
};
const QUANTIFIERS = { any: sql`any`, all: sql`all` };

function likePattern(op: string, value: string): string {
  return op === "like" || op === "ilike" ? value.replace(/\*/g, "%") : value;
}

const IS_TESTS: Record<IsTest, SQL> = {
  null: sql`is null`,
  not_null: sql`is not null`,
  true: sql`is true`,
  false: sql`is false`,
  unknown: sql`is unknown`,
};

/** One filter as a boolean SQL expression over `alias`. Values are always bound parameters. */
export function filterSql(alias: string, f: Filter): SQL {
  const lhs = fieldSql(alias, f.field);
  const operand = f.operand;
  let cond: SQL;
  if (operand.kind === "is") cond = sql`${lhs} ${IS_TESTS[operand.test]}`;
  else if (operand.kind === "list") {
    const items = operand.items.map((v) => likePattern(f.operator, v));
    if (f.quantifier) {
      const op = COMPARISONS[f.operator];
      const left = TEXT_OPERATORS.has(f.operator) ? sql`(${lhs})::text` : lhs;
      cond = sql`${left} ${op} ${QUANTIFIERS[f.quantifier]}(${sql.value(items)})`;
    } else {
      cond = items.length === 0 ? sql`false` : sql`${lhs} = any(${sql.value(items)})`;
    }
  } else if (f.operator === "isdistinct") cond = sql`${lhs} is distinct from ${sql.value(operand.text)}`;
  else if (FTS[f.operator]) {
    const fn = FTS[f.operator];
    cond = f.language
      ? sql`${lhs} @@ ${fn}(${sql.value(f.language)}::regconfig, ${sql.value(operand.text)})`
      : sql`${lhs} @@ ${fn}(${sql.value(operand.text)})`;
  } else {
    const op = COMPARISONS[f.operator];
    const left = TEXT_OPERATORS.has(f.operator) ? sql`(${lhs})::text` : lhs;
    cond = sql`${left} ${op} ${sql.value(likePattern(f.operator, operand.text))}`;
  }
  return f.negate ? sql`not (${cond})` : cond;
}

export function logicSql(alias: string, tree: LogicTree): SQL {
  const parts = tree.children.map((c) => (c.kind === "logic" ? logicSql(alias, c) : filterSql(alias, c)));
  const joined =
    parts.length === 0
      ? sql`true`
      : sql.join(
          parts.map((p) => sql`(${p})`),
          tree.operator === "or" ? " or " : " and ",
        );
  return tree.negate ? sql`not (${joined})` : sql`(${joined})`;
}
