import type { ProjectRuntime } from "../projects/runtime";

/**
 * What the data APIs and type generation know of a project's catalog: relations (tables, views, materialized views, foreign
 * tables), their columns and keys, foreign keys, and functions of the exposed schemas. Loaded with one
 * query per project and kept in the project's schema caches until the next DDL.
 */

export interface Column {
  name: string;
  /** format_type() of the column, e.g. `integer`, `text[]`, `public.mood`. */
  type: string;
  /** pg_type.typname of the column's type (`int4`, `_text`, `tstzrange`). */
  typname: string;
  typcategory: string;
  nullable: boolean;
  hasDefault: boolean;
  defaultExpr: string | null;
  generated: boolean;
  position: number;
  description: string | null;
  enumValues: string[] | null;
}

export interface Relation {
  schema: string;
  name: string;
  kind: "table" | "view" | "materialized_view" | "foreign_table" | "partitioned_table";
  columns: Column[];
  primaryKey: string[];
  /** Column sets with a unique constraint or unique index (primary key included). */
  uniques: string[][];
  insertable: boolean;
  updatable: boolean;
  deletable: boolean;
  description: string | null;
}

export interface ForeignKey {
  name: string;
  schema: string;
  table: string;
  columns: string[];
  refSchema: string;
  refTable: string;
  refColumns: string[];
}

export interface FunctionArg {
  name: string;
  /** format_type of the argument, for messages. */
  type: string;
  /** Schema and pg_type name of the argument's type, for casts (`_int4` for int[]). */
  typeSchema: string;
  typeName: string;
  hasDefault: boolean;
}

export interface RestFunction {
  schema: string;
  name: string;
  args: FunctionArg[];
  /** format_type of the return type. */
  returnType: string;
  returnsSet: boolean;
  /** Set when the function returns rows of a relation (table/composite type): schema-qualified name. */
  returnsRelation: { schema: string; name: string } | null;
  /** Return type is a composite or a `table(...)`/`out` record: results are objects. */
  returnsComposite: boolean;
  returnsVoid: boolean;
  volatility: "i" | "s" | "v";
  description: string | null;
}

export interface SchemaCache {
  schemas: string[];
  relations: Map<string, Relation>;
  foreignKeys: ForeignKey[];
  functions: Map<string, RestFunction[]>;
}

export const qualified = (schema: string, name: string) => `${schema}.${name}`;

const CATALOG_QUERY = `
with rels as (
  select c.oid, n.nspname as schema, c.relname as name, c.relkind,
         obj_description(c.oid, 'pg_class') as description
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
   where n.nspname = any($1) and c.relkind in ('r', 'v', 'm', 'f', 'p')
)
select json_build_object(
  'relations', coalesce((select json_agg(json_build_object(
      'schema', r.schema, 'name', r.name, 'relkind', r.relkind, 'description', r.description,
      'updatable', pg_relation_is_updatable(r.oid, true),
      'columns', coalesce((select json_agg(json_build_object(
          'name', a.attname, 'type', format_type(a.atttypid, a.atttypmod), 'typname', t.typname,
          'typcategory', t.typcategory, 'nullable', not a.attnotnull, 'hasDefault', a.atthasdef or a.attidentity <> '',
          'defaultExpr', pg_get_expr(d.adbin, d.adrelid), 'generated', a.attgenerated <> '',
          'position', a.attnum, 'description', col_description(r.oid, a.attnum),
          'enumValues', (select json_agg(e.enumlabel order by e.enumsortorder) from pg_enum e where e.enumtypid = a.atttypid)
        ) order by a.attnum)
        from pg_attribute a join pg_type t on t.oid = a.atttypid
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
       where a.attrelid = r.oid and a.attnum > 0 and not a.attisdropped), '[]'),
      'primaryKey', coalesce((select json_agg(a.attname order by array_position(i.indkey, a.attnum))
        from pg_index i join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)
       where i.indrelid = r.oid and i.indisprimary), '[]'),
      'uniques', coalesce((select json_agg((select json_agg(a.attname) from pg_attribute a
                                            where a.attrelid = i.indrelid and a.attnum = any(i.indkey)))
        from pg_index i where i.indrelid = r.oid and i.indisunique and i.indpred is null), '[]')
    )) from rels r), '[]'),
  'foreignKeys', coalesce((select json_agg(json_build_object(
      'name', con.conname, 'schema', n.nspname, 'table', c.relname,
      'columns', (select json_agg(a.attname order by k.ord) from unnest(con.conkey) with ordinality k(attnum, ord)
                   join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.attnum),
      'refSchema', fn.nspname, 'refTable', fc.relname,
      'refColumns', (select json_agg(a.attname order by k.ord) from unnest(con.confkey) with ordinality k(attnum, ord)
                   join pg_attribute a on a.attrelid = con.confrelid and a.attnum = k.attnum)
    ))
    from pg_constraint con
    join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
    join pg_class fc on fc.oid = con.confrelid join pg_namespace fn on fn.oid = fc.relnamespace
   where con.contype = 'f' and n.nspname = any($1) and fn.nspname = any($1)), '[]'),
  'functions', coalesce((select json_agg(json_build_object(
      'schema', n.nspname, 'name', p.proname, 'description', obj_description(p.oid, 'pg_proc'),
      'args', coalesce((select json_agg(json_build_object(
          'name', coalesce(p.proargnames[k.ord], ''), 'type', format_type(k.typ, null),
          'typeSchema', (select tn.nspname from pg_type t join pg_namespace tn on tn.oid = t.typnamespace where t.oid = k.typ),
          'typeName', (select t.typname from pg_type t where t.oid = k.typ),
          'hasDefault', k.ord > p.pronargs - p.pronargdefaults) order by k.ord)
        from unnest(p.proargtypes::oid[]) with ordinality k(typ, ord)), '[]'),
      'inArgModes', p.proargmodes,
      'returnType', format_type(p.prorettype, null), 'returnsSet', p.proretset,
      'returnTypeRelid', rt.typrelid, 'returnTypeType', rt.typtype,
      'returnRelSchema', rn.nspname, 'returnRelName', rc.relname, 'returnRelKind', rc.relkind,
      'volatility', p.provolatile
    ))
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    join pg_type rt on rt.oid = p.prorettype
    left join pg_class rc on rc.oid = rt.typrelid left join pg_namespace rn on rn.oid = rc.relnamespace
   where n.nspname = any($1) and p.prokind = 'f'), '[]')
) as catalog`;

const KINDS: Record<string, Relation["kind"]> = {
  r: "table",
  v: "view",
  m: "materialized_view",
  f: "foreign_table",
  p: "partitioned_table",
};

function toRelation(raw: any): Relation {
  const updatable = Number(raw.updatable);
  const isTable = raw.relkind === "r" || raw.relkind === "p";
  return {
    schema: raw.schema,
    name: raw.name,
    kind: KINDS[raw.relkind],
    description: raw.description,
    columns: raw.columns,
    primaryKey: raw.primaryKey,
    uniques: raw.uniques.filter((u: unknown) => Array.isArray(u)),
    // pg_relation_is_updatable bits: 8 insert, 4 update, 16 delete.
    insertable: isTable || (updatable & 8) !== 0,
    updatable: isTable || (updatable & 4) !== 0,
    deletable: isTable || (updatable & 16) !== 0,
  };
}

function toFunction(raw: any): RestFunction {
  // typrelid is an oid, which json_build_object writes as a string.
  const composite = Number(raw.returnTypeRelid) !== 0 || raw.returnType === "record";
  const relation =
    raw.returnRelName && raw.returnRelKind !== "c"
      ? { schema: raw.returnRelSchema, name: raw.returnRelName }
      : null;
  return {
    schema: raw.schema,
    name: raw.name,
    args: raw.args,
    returnType: raw.returnType,
    returnsSet: raw.returnsSet,
    returnsRelation: relation,
    returnsComposite: composite,
    returnsVoid: raw.returnType === "void",
    volatility: raw.volatility,
    description: raw.description,
  };
}

export async function loadSchemaCache(project: ProjectRuntime, schemas: string[]): Promise<SchemaCache> {
  const { rows } = await project.adminPool.query(CATALOG_QUERY, [schemas]);
  const catalog = rows[0].catalog;
  const relations = new Map<string, Relation>();
  for (const raw of catalog.relations) {
    const rel = toRelation(raw);
    relations.set(qualified(rel.schema, rel.name), rel);
  }
  const functions = new Map<string, RestFunction[]>();
  for (const raw of catalog.functions) {
    const fn = toFunction(raw);
    const key = qualified(fn.schema, fn.name);
    functions.set(key, [...(functions.get(key) ?? []), fn]);
  }
  return { schemas, relations, foreignKeys: catalog.foreignKeys, functions };
}

/** The project's schema cache for `schemas`, shared by requests until the schema changes. */
export function schemaCacheOf(project: ProjectRuntime, schemas: string[]): Promise<SchemaCache> {
  const key = `catalog:schema:${schemas.join(",")}`;
  let cached = project.caches.get(key) as Promise<SchemaCache> | undefined;
  if (!cached) {
    cached = loadSchemaCache(project, schemas);
    project.caches.set(key, cached);
    cached.catch(() => project.caches.get(key) === cached && project.caches.delete(key));
  }
  return cached;
}
