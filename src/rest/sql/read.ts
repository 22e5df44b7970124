import { sql, type SQL } from "pg-sql2";
import type { Field, OrderTerm } from "../request/grammar";
import type { ReadNode, Relationship } from "../readPlan";
import { fieldSql, filterSql, logicSql } from "./filters";

/**
 * Stage 3 for reads: a plan rendered as one SQL statement whose result is built as JSON by PostgreSQL.
 * Embeds are correlated subqueries: arrays for to-many, objects for to-one.
 */

/** SQL spellings of built-in types, to their pg_type names (casts are rendered as quoted identifiers). */
const TYPE_ALIASES: Record<string, string> = {
  int: "int4",
  integer: "int4",
  smallint: "int2",
  bigint: "int8",
  decimal: "numeric",
  real: "float4",
  float: "float8",
  "double precision": "float8",
  boolean: "bool",
  "character varying": "varchar",
  character: "bpchar",
  char: "bpchar",
  timestamp: "timestamp",
  "timestamp with time zone": "timestamptz",
  "timestamp without time zone": "timestamp",
  "time with time zone": "timetz",
  "time without time zone": "time",
};

/** `::text`, `::integer[]`, `::mood`: a type name from the request becomes a quoted identifier, never raw text. */
function castType(cast: string): SQL {
  const array = cast.endsWith("[]");
  const base = cast.replace(/\[\]$/, "").trim().toLowerCase();
  const name = TYPE_ALIASES[base] ?? base;
  return sql.identifier(array ? `_${name}` : name);
}

/** The join condition of `child` to its parent row `parentAlias`. */
function joinCondition(r: Relationship, parentAlias: string, childAlias: string): SQL {
  const pairs = (leftAlias: string, left: string[], rightAlias: string, right: string[]) =>
    sql.join(
      left.map((c, i) => sql`${sql.identifier(leftAlias, c)} = ${sql.identifier(rightAlias, right[i])}`),
      " and ",
    );
  if (r.junction) {
    const j = `${childAlias}_j`;
    const { relation, toParent, toChild } = r.junction;
    return sql`exists (select 1 from ${sql.identifier(relation.schema, relation.name)} as ${sql.identifier(j)}
      where ${pairs(j, toParent.columns, parentAlias, toParent.refColumns)}
        and ${pairs(j, toChild.columns, childAlias, toChild.refColumns)})`;
  }
  return r.fkOnChild
    ? pairs(childAlias, r.fk.columns, parentAlias, r.fk.refColumns)
    : pairs(childAlias, r.fk.refColumns, parentAlias, r.fk.columns);
}

const isToOne = (r: Relationship) => r.cardinality === "many-to-one" || r.cardinality === "one-to-one";

/** The WHERE conditions of a node: its filters, logic trees and the existence of its inner embeds. */
export function whereConditions(node: ReadNode): SQL[] {
  const conds: SQL[] = [
    ...node.filters.map((f) => filterSql(node.alias, f)),
    ...node.logic.map((t) => logicSql(node.alias, t)),
  ];
  for (const child of node.children) {
    if (!child.join?.inner) continue;
    const where = [
      joinCondition(child.join.relationship, node.alias, child.alias),
      ...whereConditions(child),
    ];
    conds.push(
      sql`exists (select 1 from ${sql.identifier(child.relation.schema, child.relation.name)} as ${sql.identifier(child.alias)} where ${sql.join(where, " and ")})`,
    );
  }
  return conds;
}

export function whereSql(conds: SQL[]): SQL {
  return conds.length ? sql`where ${sql.join(conds, " and ")}` : sql.blank;
}

function orderTermSql(node: ReadNode, term: OrderTerm): SQL {
  let expr: SQL;
  if (term.relation) {
    const child = node.children.find(
      (c) => c.join?.name === term.relation || c.relation.name === term.relation,
    )!;
    const where = [
      joinCondition(child.join!.relationship, node.alias, child.alias),
      ...whereConditions(child),
    ];
    expr = sql`(select ${fieldSql(child.alias, term.field)} from ${sql.identifier(child.relation.schema, child.relation.name)} as ${sql.identifier(child.alias)} where ${sql.join(where, " and ")} limit 1)`;
  } else {
    expr = fieldSql(node.alias, term.field);
  }
  const dir = term.direction === "desc" ? sql` desc` : sql` asc`;
  const nulls =
    term.nulls === "first" ? sql` nulls first` : term.nulls === "last" ? sql` nulls last` : sql.blank;
  return sql`${expr}${dir}${nulls}`;
}

export function orderSql(node: ReadNode, terms: OrderTerm[] = node.order): SQL {
  return terms.length
    ? sql`order by ${sql.join(
        terms.map((t) => orderTermSql(node, t)),
        ", ",
      )}`
    : sql.blank;
}

export function pageSql(limit: number | undefined, offset: number | undefined): SQL {
  return sql`${limit !== undefined ? sql`limit ${sql.literal(limit)}` : sql.blank} ${offset ? sql`offset ${sql.literal(offset)}` : sql.blank}`;
}

/** The rows of an embed, as a correlated subquery yielding JSON. */
function embedSql(parent: ReadNode, child: ReadNode): SQL {
  const r = child.join!.relationship;
  const from = sql`from ${sql.identifier(child.relation.schema, child.relation.name)} as ${sql.identifier(child.alias)}`;
  const where = whereSql([joinCondition(r, parent.alias, child.alias), ...whereConditions(child)]);
  const counts = child.items.filter((i) => i.kind === "count");
  if (counts.length && counts.length === child.items.length) {
    const cols = sql.join(
      counts.map((c) => sql`count(*) as ${sql.identifier(c.name)}`),
      ", ",
    );
    return sql`(select coalesce(json_agg(pgrst_x), '[]') from (select ${cols} ${from} ${where}) as pgrst_x)`;
  }
  const inner = sql`select ${selectList(child)} ${from} ${where} ${orderSql(child)} ${pageSql(isToOne(r) ? 1 : child.limit, child.offset)}`;
  return isToOne(r)
    ? sql`(select row_to_json(pgrst_x) from (${inner}) as pgrst_x)`
    : sql`(select coalesce(json_agg(pgrst_x), '[]') from (${inner}) as pgrst_x)`;
}

/** A to-one embed spread into its parent: one subquery per spread column. */
function spreadColumns(parent: ReadNode, child: ReadNode): SQL[] {
  const r = child.join!.relationship;
  const from = sql`from ${sql.identifier(child.relation.schema, child.relation.name)} as ${sql.identifier(child.alias)}`;
  const where = whereSql([joinCondition(r, parent.alias, child.alias), ...whereConditions(child)]);
  return child.items.flatMap((item) => {
    if (item.kind !== "column") return [];
    return [
      sql`(select ${columnExpr(child.alias, item.field, item.cast)} ${from} ${where} limit 1) as ${sql.identifier(item.name)}`,
    ];
  });
}

function columnExpr(alias: string, field: Field, cast?: string): SQL {
  const expr = fieldSql(alias, field);
  return cast ? sql`(${expr})::${castType(cast)}` : expr;
}

/** The output columns of a node, in the order they were selected. */
export function selectList(node: ReadNode): SQL {
  const cols: SQL[] = [];
  for (const item of node.items) {
    if (item.kind === "all") cols.push(sql`${sql.identifier(node.alias)}.*`);
    else if (item.kind === "column")
      cols.push(sql`${columnExpr(node.alias, item.field, item.cast)} as ${sql.identifier(item.name)}`);
    else if (item.kind === "embed") {
      const j = item.node.join!;
      if (j.name === undefined) continue;
      if (j.spread) cols.push(...spreadColumns(node, item.node));
      else cols.push(sql`${embedSql(node, item.node)} as ${sql.identifier(j.name)}`);
    }
  }
  return cols.length ? sql.join(cols, ", ") : sql`null as "pgrst_empty"`;
}
