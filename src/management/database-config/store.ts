import type pg from "pg";
import { allRows } from "../rows";

/** Catalog reads and Strata's own functions on a project's database (as the superuser, Strata-written only). */

/** The database's name and its schemas (Postgres' own and information_schema left out). */
export async function databaseContext(
  adminPool: pg.Pool,
): Promise<{ name: string; schemas: { name: string }[] }[]> {
  return allRows(
    adminPool,
    `select current_database() as name,
            (select coalesce(json_agg(json_build_object('name', nspname) order by nspname), '[]') from pg_namespace
              where nspname !~ '^pg_' and nspname <> 'information_schema') as schemas`,
  );
}

/** Installs supabase_functions.http_request() and its queue; Strata's dispatcher sends what the triggers queue. */
export async function enableWebhooks(adminPool: pg.Pool): Promise<void> {
  await adminPool.query("select _strata.enable_webhooks()");
}
