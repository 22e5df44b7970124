import { Router } from "express";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { routeTable } from "../route";

/** Advisors: lints computed from the project's catalog, in the platform's Lint shape. */

interface Lint {
  name: string;
  title: string;
  level: "ERROR" | "WARN" | "INFO";
  facing: "EXTERNAL";
  categories: ("SECURITY" | "PERFORMANCE")[];
  description: string;
  detail: string;
  remediation: string;
  metadata: Record<string, unknown>;
  cache_key: string;
}

const EXPOSED = ["public"];

async function securityLints(project: ProjectRuntime): Promise<Lint[]> {
  const noRls = await project.adminPool.query(
    `select n.nspname as schema, c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p') and not c.relrowsecurity and n.nspname = any($1) order by 1, 2`,
    [EXPOSED],
  );
  const mutablePath = await project.adminPool.query(
    `select n.nspname as schema, p.proname as name from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = any($1) and p.prokind = 'f'
        and not exists (select 1 from unnest(coalesce(p.proconfig, '{}')) c where c like 'search_path=%') order by 1, 2`,
    [EXPOSED],
  );
  const definerViews = await project.adminPool.query(
    `select n.nspname as schema, c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where c.relkind = 'v' and n.nspname = any($1)
        and not coalesce(array_to_string(c.reloptions, ',') like '%security_invoker=true%', false) order by 1, 2`,
    [EXPOSED],
  );
  return [
    ...noRls.rows.map((r) => ({
      name: "rls_disabled_in_public",
      title: "RLS Disabled in Public",
      level: "ERROR" as const,
      facing: "EXTERNAL" as const,
      categories: ["SECURITY" as const],
      description:
        "Detects tables in an exposed schema without row level security: every API role can read and write them as granted.",
      detail: `Table \`${r.schema}.${r.name}\` is public, but RLS has not been enabled.`,
      remediation: "Enable row level security on the table and add policies.",
      metadata: { schema: r.schema, name: r.name, type: "table" },
      cache_key: `rls_disabled_in_public_${r.schema}_${r.name}`,
    })),
    ...definerViews.rows.map((r) => ({
      name: "security_definer_view",
      title: "Security Definer View",
      level: "ERROR" as const,
      facing: "EXTERNAL" as const,
      categories: ["SECURITY" as const],
      description:
        "Detects views that run with their owner's privileges instead of the caller's, bypassing row level security.",
      detail: `View \`${r.schema}.${r.name}\` is defined without security_invoker.`,
      remediation: "alter view ... set (security_invoker = true)",
      metadata: { schema: r.schema, name: r.name, type: "view" },
      cache_key: `security_definer_view_${r.schema}_${r.name}`,
    })),
    ...mutablePath.rows.map((r) => ({
      name: "function_search_path_mutable",
      title: "Function Search Path Mutable",
      level: "WARN" as const,
      facing: "EXTERNAL" as const,
      categories: ["SECURITY" as const],
      description:
        "Detects functions whose search_path is not set, so callers can change what their unqualified names resolve to.",
      detail: `Function \`${r.schema}.${r.name}\` has a role mutable search_path.`,
      remediation: "alter function ... set search_path = ''",
      metadata: { schema: r.schema, name: r.name, type: "function" },
      cache_key: `function_search_path_mutable_${r.schema}_${r.name}`,
    })),
  ];
}

async function performanceLints(project: ProjectRuntime): Promise<Lint[]> {
  const unindexed = await project.adminPool.query(
    `select n.nspname as schema, c.relname as name, con.conname as fkey_name, con.conkey::int[] as fkey_columns
       from pg_constraint con join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace
      where con.contype = 'f' and n.nspname = any($1)
        and not exists (select 1 from pg_index i where i.indrelid = con.conrelid
                          and (i.indkey::int2[])[0:cardinality(con.conkey) - 1] @> con.conkey)
      order by 1, 2, 3`,
    [EXPOSED],
  );
  const duplicates = await project.adminPool.query(
    `select n.nspname as schema, c.relname as name, array_agg(ic.relname order by ic.relname) as indexes
       from pg_index i join pg_class c on c.oid = i.indrelid join pg_namespace n on n.oid = c.relnamespace
       join pg_class ic on ic.oid = i.indexrelid
      where n.nspname = any($1)
      group by n.nspname, c.relname, i.indkey::text, coalesce(pg_get_expr(i.indexprs, i.indrelid), ''), coalesce(pg_get_expr(i.indpred, i.indrelid), '')
     having count(*) > 1`,
    [EXPOSED],
  );
  return [
    ...unindexed.rows.map((r) => ({
      name: "unindexed_foreign_keys",
      title: "Unindexed foreign keys",
      level: "INFO" as const,
      facing: "EXTERNAL" as const,
      categories: ["PERFORMANCE" as const],
      description:
        "Identifies foreign key constraints without a covering index, which can slow joins and cascading deletes.",
      detail: `Table \`${r.schema}.${r.name}\` has a foreign key \`${r.fkey_name}\` without a covering index.`,
      remediation: "Create an index on the foreign key's columns.",
      metadata: {
        schema: r.schema,
        name: r.name,
        type: "table",
        fkey_name: r.fkey_name,
        fkey_columns: r.fkey_columns,
      },
      cache_key: `unindexed_foreign_keys_${r.schema}_${r.name}_${r.fkey_name}`,
    })),
    ...duplicates.rows.map((r) => ({
      name: "duplicate_index",
      title: "Duplicate Index",
      level: "WARN" as const,
      facing: "EXTERNAL" as const,
      categories: ["PERFORMANCE" as const],
      description: "Detects identical indexes on the same table.",
      detail: `Table \`${r.schema}.${r.name}\` has identical indexes ${JSON.stringify(r.indexes)}.`,
      remediation: "Drop all but one of them.",
      metadata: { schema: r.schema, name: r.name, type: "table", indexes: r.indexes },
      cache_key: `duplicate_index_${r.schema}_${r.name}_${r.indexes.join("_")}`,
    })),
  ];
}

export function advisorRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  const access = { permission: "advisors_read", scope: "database:read" };
  routes.get(
    "/v1/projects/:ref/advisors/security",
    "Security lints of the project's database",
    { access, status: 200 },
    async ({ project }) => ({
      lints: await securityLints(project),
    }),
  );
  routes.get(
    "/v1/projects/:ref/advisors/performance",
    "Performance lints of the project's database",
    { access, status: 200 },
    async ({ project }) => ({
      lints: await performanceLints(project),
    }),
  );
  return routes.router;
}
