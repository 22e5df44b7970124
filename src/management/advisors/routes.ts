import { Router } from "express";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { routeTable } from "../route";
import {
  duplicateIndexes,
  functionsWithoutSearchPath,
  tablesWithoutRls,
  unindexedForeignKeys,
  viewsWithoutSecurityInvoker,
  type Relation,
} from "./store";

/** Advisors: lints computed from the project's catalog, in the platform's Lint shape. */

type Category = "SECURITY" | "PERFORMANCE";

interface Lint {
  name: string;
  title: string;
  level: "ERROR" | "WARN" | "INFO";
  facing: "EXTERNAL";
  categories: Category[];
  description: string;
  detail: string;
  remediation: string;
  metadata: Record<string, unknown>;
  cache_key: string;
}

/** What a rule says of every object it finds. */
type Rule = Pick<Lint, "name" | "title" | "level" | "description" | "remediation"> & { category: Category };

const RULES = {
  rlsDisabled: {
    name: "rls_disabled_in_public",
    title: "RLS Disabled in Public",
    level: "ERROR",
    category: "SECURITY",
    description:
      "Detects tables in an exposed schema without row level security: every API role can read and write them as granted.",
    remediation: "Enable row level security on the table and add policies.",
  },
  securityDefinerView: {
    name: "security_definer_view",
    title: "Security Definer View",
    level: "ERROR",
    category: "SECURITY",
    description:
      "Detects views that run with their owner's privileges instead of the caller's, bypassing row level security.",
    remediation: "alter view ... set (security_invoker = true)",
  },
  mutableSearchPath: {
    name: "function_search_path_mutable",
    title: "Function Search Path Mutable",
    level: "WARN",
    category: "SECURITY",
    description:
      "Detects functions whose search_path is not set, so callers can change what their unqualified names resolve to.",
    remediation: "alter function ... set search_path = ''",
  },
  unindexedForeignKey: {
    name: "unindexed_foreign_keys",
    title: "Unindexed foreign keys",
    level: "INFO",
    category: "PERFORMANCE",
    description:
      "Identifies foreign key constraints without a covering index, which can slow joins and cascading deletes.",
    remediation: "Create an index on the foreign key's columns.",
  },
  duplicateIndex: {
    name: "duplicate_index",
    title: "Duplicate Index",
    level: "WARN",
    category: "PERFORMANCE",
    description: "Detects identical indexes on the same table.",
    remediation: "Drop all but one of them.",
  },
} satisfies Record<string, Rule>;

/** One finding of `rule` on `object` (of `type`); the cache key is the rule's name and `keyParts`. */
function lint(
  rule: Rule,
  object: Relation,
  found: { type: string; detail: string; metadata?: Record<string, unknown>; keyParts?: string[] },
): Lint {
  return {
    name: rule.name,
    title: rule.title,
    level: rule.level,
    facing: "EXTERNAL",
    categories: [rule.category],
    description: rule.description,
    detail: found.detail,
    remediation: rule.remediation,
    metadata: { schema: object.schema, name: object.name, type: found.type, ...found.metadata },
    cache_key: [rule.name, object.schema, object.name, ...(found.keyParts ?? [])].join("_"),
  };
}

const EXPOSED = ["public"];

async function securityLints(project: ProjectRuntime): Promise<Lint[]> {
  const noRls = await tablesWithoutRls(project.adminPool, EXPOSED);
  const mutablePath = await functionsWithoutSearchPath(project.adminPool, EXPOSED);
  const definerViews = await viewsWithoutSecurityInvoker(project.adminPool, EXPOSED);
  return [
    ...noRls.map((r) =>
      lint(RULES.rlsDisabled, r, {
        type: "table",
        detail: `Table \`${r.schema}.${r.name}\` is public, but RLS has not been enabled.`,
      }),
    ),
    ...definerViews.map((r) =>
      lint(RULES.securityDefinerView, r, {
        type: "view",
        detail: `View \`${r.schema}.${r.name}\` is defined without security_invoker.`,
      }),
    ),
    ...mutablePath.map((r) =>
      lint(RULES.mutableSearchPath, r, {
        type: "function",
        detail: `Function \`${r.schema}.${r.name}\` has a role mutable search_path.`,
      }),
    ),
  ];
}

async function performanceLints(project: ProjectRuntime): Promise<Lint[]> {
  const unindexed = await unindexedForeignKeys(project.adminPool, EXPOSED);
  const duplicates = await duplicateIndexes(project.adminPool, EXPOSED);
  return [
    ...unindexed.map((r) =>
      lint(RULES.unindexedForeignKey, r, {
        type: "table",
        detail: `Table \`${r.schema}.${r.name}\` has a foreign key \`${r.fkey_name}\` without a covering index.`,
        metadata: { fkey_name: r.fkey_name, fkey_columns: r.fkey_columns },
        keyParts: [r.fkey_name],
      }),
    ),
    ...duplicates.map((r) =>
      lint(RULES.duplicateIndex, r, {
        type: "table",
        detail: `Table \`${r.schema}.${r.name}\` has identical indexes ${JSON.stringify(r.indexes)}.`,
        metadata: { indexes: r.indexes },
        keyParts: [r.indexes.join("_")],
      }),
    ),
  ];
}

export function advisorRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "database" });
  const access = { permission: "advisors_read", scope: "database:read" };
  routes.get(
    "/v1/projects/:ref/advisors/security",
    "Security lints of the project's database",
    { access, status: 200 },
    async ({ project }) => ({ lints: await securityLints(project) }),
  );
  routes.get(
    "/v1/projects/:ref/advisors/performance",
    "Performance lints of the project's database",
    { access, status: 200 },
    async ({ project }) => ({ lints: await performanceLints(project) }),
  );
  return routes.router;
}
