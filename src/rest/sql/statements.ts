import { sql, type SQL } from "pg-sql2";
import type { InsertSpec, Page, Plan } from "../plan";
import type { ReadNode } from "../readPlan";
import type { FunctionArg, Relation, RestFunction } from "../../catalog/schemaCache";
import { orderSql, pageSql, selectList, whereConditions, whereSql } from "./read";

/**
 * Whole statements. Every request is one statement returning one row:
 * `total` (the requested count, or null), `page` (rows in the body), `body` (JSON text) and, for
 * upserts, `inserted` (rows that were new).
 */

const relationSql = (rel: Relation) => sql.identifier(rel.schema, rel.name);

function envelope(rows: SQL, count: SQL, inserted: SQL = sql`null::bigint`): SQL {
  return sql`select ${count} as total, count(pgrst_t) as page, coalesce(json_agg(pgrst_t), '[]')::text as body, ${inserted} as inserted
    from (${rows}) as pgrst_t`;
}

/** GET/HEAD on a relation or on a set-returning function's rows (`source` renders the FROM item). */
function readStatement(
  root: ReadNode,
  page: Page,
  withCount: boolean,
  source: SQL = relationSql(root.relation),
): SQL {
  const from = sql`from ${source} as ${sql.identifier(root.alias)}`;
  const where = whereSql(whereConditions(root));
  const rows = sql`select ${selectList(root)} ${from} ${where} ${orderSql(root)} ${pageSql(page.limit, page.offset)}`;
  const count = withCount ? sql`(select count(*) ${from} ${where})` : sql`null::bigint`;
  return envelope(rows, count);
}

/** Mutations: the DML in a CTE, then the same shaping of the affected rows as a read. */
function mutationEnvelope(dml: SQL, root: ReadNode, inserted = false): SQL {
  const rows = sql`select ${selectList(root)} from pgrst_source as ${sql.identifier(root.alias)}`;
  return sql`with pgrst_source as (${dml})
    ${envelope(
      rows,
      sql`(select count(*) from pgrst_source)`,
      inserted ? sql`(select count(*) from pgrst_source where pgrst_inserted)` : sql`null::bigint`,
    )}`;
}

/** Whether an insert needs a VALUES row per payload row, so that an absent key can be DEFAULT. */
function valuesPerRow(spec: InsertSpec): boolean {
  return spec.missingDefault && spec.rows.some((r) => spec.columns.some((c) => !(c in r)));
}

function insertStatement(root: ReadNode, spec: InsertSpec): SQL {
  const rel = root.relation;
  const target = sql`${relationSql(rel)} as ${sql.identifier(root.alias)}`;
  const cols = sql.join(
    spec.columns.map((c) => sql.identifier(c)),
    ", ",
  );
  let source: SQL;
  if (spec.columns.length === 0) {
    source = sql`default values`;
  } else if (valuesPerRow(spec)) {
    const rows = spec.rows.map((r) => {
      const rowJson = sql.value(JSON.stringify(r));
      const cells = spec.columns.map((c) =>
        c in r
          ? sql`(json_populate_record(null::${relationSql(rel)}, ${rowJson}::json)).${sql.identifier(c)}`
          : sql`default`,
      );
      return sql`(${sql.join(cells, ", ")})`;
    });
    source = sql`values ${sql.join(rows, ", ")}`;
  } else {
    source = sql`select ${cols} from json_populate_recordset(null::${relationSql(rel)}, ${sql.value(payloadJson(spec.rows))}::json)`;
  }
  let conflict: SQL = sql.blank;
  if (spec.onConflict) {
    const target = sql.join(
      spec.onConflict.columns.map((c) => sql.identifier(c)),
      ", ",
    );
    const updates = spec.columns.map((c) => sql`${sql.identifier(c)} = excluded.${sql.identifier(c)}`);
    conflict =
      spec.onConflict.action === "merge" && updates.length
        ? sql`on conflict (${target}) do update set ${sql.join(updates, ", ")}`
        : sql`on conflict (${target}) do nothing`;
  }
  const columnList = spec.columns.length ? sql`(${cols})` : sql.blank;
  const dml = sql`insert into ${target} ${columnList} ${source} ${conflict}
    returning ${sql.identifier(root.alias)}.*, (${sql.identifier(root.alias)}.xmax = 0) as pgrst_inserted`;
  return mutationEnvelope(dml, root, true);
}

/** Rows addressed by a PATCH/DELETE with `limit` (PostgREST requires an order for it). */
function limitedTarget(root: ReadNode, page: Page): SQL | undefined {
  if (page.limit === undefined) return undefined;
  const rel = relationSql(root.relation);
  const alias = sql.identifier(root.alias);
  return sql`${alias}.ctid = any(array(select ${alias}.ctid from ${rel} as ${alias} ${whereSql(whereConditions(root))} ${orderSql(root)} ${pageSql(page.limit, page.offset)}))`;
}

function updateStatement(
  root: ReadNode,
  columns: string[],
  payload: Record<string, unknown>,
  page: Page,
): SQL {
  const rel = root.relation;
  const alias = sql.identifier(root.alias);
  const sets = columns.map((c) => sql`${sql.identifier(c)} = pgrst_body.${sql.identifier(c)}`);
  const limited = limitedTarget(root, page);
  const where = whereSql(limited ? [limited] : whereConditions(root));
  const dml = sql`update ${relationSql(rel)} as ${alias} set ${sql.join(sets, ", ")}
    from (select * from json_populate_record(null::${relationSql(rel)}, ${sql.value(payloadJson(payload))}::json)) as pgrst_body
    ${where} returning ${alias}.*`;
  return mutationEnvelope(dml, root);
}

function deleteStatement(root: ReadNode, page: Page): SQL {
  const alias = sql.identifier(root.alias);
  const limited = limitedTarget(root, page);
  const where = whereSql(limited ? [limited] : whereConditions(root));
  const dml = sql`delete from ${relationSql(root.relation)} as ${alias} ${where} returning ${alias}.*`;
  return mutationEnvelope(dml, root);
}

/** An argument's type, as a qualified identifier from the catalog. */
const argType = (a: FunctionArg) => sql.identifier(a.typeSchema, a.typeName);

/** The call of `fn` with named arguments; POST arguments arrive as one JSON object, GET ones as text. */
function functionCall(fn: RestFunction, args: Record<string, unknown>, fromQuery: boolean): SQL {
  const name = sql.identifier(fn.schema, fn.name);
  if (fn.args.length === 1 && fn.args[0].name === "" && /^jsonb?$/.test(fn.args[0].type)) {
    return sql`${name}(${sql.value(JSON.stringify(args))}::${argType(fn.args[0])})`;
  }
  const given = fn.args.filter((a) => a.name in args);
  if (given.length === 0) return sql`${name}()`;
  if (fromQuery) {
    // The argument types come from the catalog (format_type), never from the request.
    const named = given.map(
      (a) => sql`${sql.identifier(a.name)} => ${sql.value(String(args[a.name]))}::${argType(a)}`,
    );
    return sql`${name}(${sql.join(named, ", ")})`;
  }
  const record = sql.join(
    given.map((a) => sql`${sql.identifier(a.name)} ${argType(a)}`),
    ", ",
  );
  const named = given.map((a) => sql`${sql.identifier(a.name)} => pgrst_args.${sql.identifier(a.name)}`);
  const payload = Object.fromEntries(given.map((a) => [a.name, args[a.name]]));
  return sql`(select ${name}(${sql.join(named, ", ")}) from json_to_record(${sql.value(JSON.stringify(payload))}::json) as pgrst_args(${record}))`;
}

/** A function returning a scalar, an array or a single composite: the body is its JSON value. */
function scalarCallStatement(call: SQL): SQL {
  return sql`select null::bigint as total, 1 as page, to_json(${call})::text as body, null::bigint as inserted`;
}

/** A set-returning function's rows as a FROM item, for reads over them. */
function setCallSource(fn: RestFunction, args: Record<string, unknown>, fromQuery: boolean): SQL {
  const call = functionCall(fn, args, fromQuery);
  // `(select f(...) from json_to_record(...))` is a scalar subquery; a FROM item needs the bare call.
  if (
    fromQuery ||
    fn.args.length === 0 ||
    !fn.args.some((a) => a.name in args) ||
    (fn.args.length === 1 && fn.args[0].name === "")
  ) {
    return call;
  }
  const given = fn.args.filter((a) => a.name in args);
  const record = sql.join(
    given.map((a) => sql`${sql.identifier(a.name)} ${argType(a)}`),
    ", ",
  );
  const named = given.map((a) => sql`${sql.identifier(a.name)} => pgrst_args.${sql.identifier(a.name)}`);
  const payload = Object.fromEntries(given.map((a) => [a.name, args[a.name]]));
  return sql`(select pgrst_r.* from json_to_record(${sql.value(JSON.stringify(payload))}::json) as pgrst_args(${record}),
    lateral ${sql.identifier(fn.schema, fn.name)}(${sql.join(named, ", ")}) as pgrst_r)`;
}

/**
 * Rows of a set-returning function of scalars: a JSON array of the values. The source's one column is named
 * pgrst_v (a column wins over the alias's whole row, which a subquery source would otherwise give).
 */
function scalarSetStatement(source: SQL, page: Page): SQL {
  return sql`select null::bigint as total, count(*) as page, coalesce(json_agg(pgrst_v), '[]')::text as body, null::bigint as inserted
    from (select pgrst_v from ${source} as pgrst_v(pgrst_v) ${pageSql(page.limit, page.offset)}) as pgrst_s`;
}

/** The one parameter of a write's statement that carries its payload: the rows (insert) or the values to set (update). */
const payloadJson = (payload: unknown): string => JSON.stringify(payload);

/**
 * What a write's statement binds of its payload, when that is all it takes of it: the statement's text then
 * depends on the plan's columns but not on the payload's values, and the one parameter `json` (null for a
 * delete, which has no payload) is the only one that changes with them. Undefined for other plans (reads,
 * calls, an insert with a VALUES row per payload row).
 */
export function writePayloadOf(plan: Plan): { columns: readonly string[]; json: string | null } | undefined {
  switch (plan.kind) {
    case "insert":
      if (plan.insert.rows.length === 0 || plan.insert.columns.length === 0 || valuesPerRow(plan.insert))
        return undefined;
      return { columns: plan.insert.columns, json: payloadJson(plan.insert.rows) };
    case "update":
      return plan.columns.length === 0
        ? undefined
        : { columns: plan.columns, json: payloadJson(plan.payload) };
    case "delete":
      return { columns: [], json: null };
    default:
      return undefined;
  }
}

/** The one statement a plan runs, or undefined when it affects nothing (no rows to insert, no columns to set). */
export function statementOf(plan: Plan): SQL | undefined {
  switch (plan.kind) {
    case "read":
      return readStatement(plan.root, plan.page, plan.count);
    case "insert":
      return plan.insert.rows.length === 0 ? undefined : insertStatement(plan.root, plan.insert);
    case "update":
      return plan.columns.length === 0
        ? undefined
        : updateStatement(plan.root, plan.columns, plan.payload, { limit: plan.limit });
    case "delete":
      return deleteStatement(plan.root, { limit: plan.limit });
    case "call": {
      const { fn, args, viaQuery, page, result } = plan;
      if (result.kind === "rows")
        return readStatement(result.root, page, result.count, setCallSource(fn, args, viaQuery));
      if (result.kind === "scalars") return scalarSetStatement(setCallSource(fn, args, viaQuery), page);
      return scalarCallStatement(functionCall(fn, args, viaQuery));
    }
  }
}
