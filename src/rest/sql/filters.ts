import { sql, type SQL } from "pg-sql2";
import { parseList, type Field, type Filter, type LogicTree } from "../request/grammar";
import { errors } from "../errors";

/** `alias."col"->'k'->>0`: a column with its JSON path. */
export function fieldSql(alias: string, field: Field): SQL {
  let expr = sql.identifier(alias, field.name);
  for (const step of field.path) {
    const key = step.index ? sql.literal(Number(step.key)) : sql.literal(step.key);
    expr = step.arrow === "->" ? sql`(${expr} -> ${key})` : sql`(${expr} ->> ${key})`;
  }
  return expr;
}

/** A PostgreSQL array literal of text items, for `= any($1)`; PostgreSQL casts it to the column's type. */
export function arrayLiteral(items: string[]): string {
  return "{" + items.map((i) => '"' + i.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"').join(",") + "}";
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

function isSql(f: Filter, lhs: SQL): SQL {
  switch (f.value.toLowerCase()) {
    case "null":
      return sql`${lhs} is null`;
    case "not_null":
      return sql`${lhs} is not null`;
    case "true":
      return sql`${lhs} is true`;
    case "false":
      return sql`${lhs} is false`;
    case "unknown":
      return sql`${lhs} is unknown`;
    default:
      throw errors.parse(
        "filter",
        `is.${f.value}`,
        4,
        `unexpected "${f.value}" expecting null, not_null, true, false or unknown`,
      );
  }
}

/** One filter as a boolean SQL expression over `alias`. Values are always bound parameters. */
export function filterSql(alias: string, f: Filter): SQL {
  const lhs = fieldSql(alias, f.field);
  let cond: SQL;
  if (f.operator === "is") cond = isSql(f, lhs);
  else if (f.operator === "isdistinct") cond = sql`${lhs} is distinct from ${sql.value(f.value)}`;
  else if (f.operator === "in") {
    const items = parseList(f.value);
    cond = items.length === 0 ? sql`false` : sql`${lhs} = any(${sql.value(arrayLiteral(items))})`;
  } else if (FTS[f.operator]) {
    const fn = FTS[f.operator];
    cond = f.language
      ? sql`${lhs} @@ ${fn}(${sql.value(f.language)}::regconfig, ${sql.value(f.value)})`
      : sql`${lhs} @@ ${fn}(${sql.value(f.value)})`;
  } else {
    const op = COMPARISONS[f.operator];
    const left = TEXT_OPERATORS.has(f.operator) ? sql`(${lhs})::text` : lhs;
    if (f.quantifier) {
      const items = parseList(f.value).map((v) => likePattern(f.operator, v));
      cond = sql`${left} ${op} ${QUANTIFIERS[f.quantifier]}(${sql.value(arrayLiteral(items))})`;
    } else {
      cond = sql`${left} ${op} ${sql.value(likePattern(f.operator, f.value))}`;
    }
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
