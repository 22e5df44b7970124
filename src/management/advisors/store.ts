import type pg from "pg";
import { allRows } from "../rows";

/** Catalog queries over the objects of the exposed schemas, as the superuser (pg_catalog only, schemas bound). */

export interface Relation {
  schema: string;
  name: string;
}

export async function tablesWithoutRls(pool: pg.Pool, schemas: string[]): Promise<Relation[]> {
  return allRows(
    pool,
    `select n.nspname as schema, c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p') and not c.relrowsecurity and n.nspname = any($1) order by 1, 2`,
    [schemas],
  );
}

export async function functionsWithoutSearchPath(pool: pg.Pool, schemas: string[]): Promise<Relation[]> {
  return allRows(
    pool,
    `select n.nspname as schema, p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = any($1) and p.prokind = 'f'
        and not exists (select 1 from unnest(coalesce(p.proconfig, '{}')) c where c like 'search_path=%') order by 1, 2`,
    [schemas],
  );
}

export async function viewsWithoutSecurityInvoker(pool: pg.Pool, schemas: string[]): Promise<Relation[]> {
  return allRows(
    pool,
    `select n.nspname as schema, c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind = 'v' and n.nspname = any($1)
        and not coalesce(array_to_string(c.reloptions, ',') like '%security_invoker=true%', false) order by 1, 2`,
    [schemas],
  );
}

export async function unindexedForeignKeys(
  pool: pg.Pool,
  schemas: string[],
): Promise<(Relation & { fkey_name: string; fkey_columns: number[] })[]> {
  return allRows(
    pool,
    `select n.nspname as schema, c.relname as name, con.conname as fkey_name, con.conkey::int[] as fkey_columns
       from pg_constraint con join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
      where con.contype = 'f' and n.nspname = any($1)
        and not exists (select 1 from pg_index i where i.indrelid = con.conrelid
                          and (i.indkey::int2[])[0:cardinality(con.conkey) - 1] @> con.conkey)
      order by 1, 2, 3`,
    [schemas],
  );
}

/** Tables with indexes alike (same columns, expressions and predicate), the indexes by name. */
export async function duplicateIndexes(
  pool: pg.Pool,
  schemas: string[],
): Promise<(Relation & { indexes: string[] })[]> {
  return allRows(
    pool,
    `select n.nspname as schema, c.relname as name, array_agg(ic.relname order by ic.relname) as indexes
       from pg_index i join pg_class c on c.oid = i.indrelid join pg_namespace n on n.oid = c.relnamespace
       join pg_class ic on ic.oid = i.indexrelid
      where n.nspname = any($1)
      group by n.nspname, c.relname, i.indkey::text, coalesce(pg_get_expr(i.indexprs, i.indrelid), ''), coalesce(pg_get_expr(i.indpred, i.indrelid), '')
     having count(*) > 1`,
    [schemas],
  );
}
