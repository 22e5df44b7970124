import type pg from "pg";
import { HttpError } from "../http";

/**
 * Organization plans and what they entitle a project to. Strata bills nothing: a plan is the operator's
 * decision (`npm run strata -- org plan <slug> <plan>`), and it decides which Management API features a
 * project of the organization may use, as the platform's plans do. Add-ons (billing/addons) are per project
 * and act: compute sizes the project's pools and connection limits, custom_domain and pitr open the
 * features of the same names.
 */

export const PLANS = ["free", "pro", "team", "enterprise"] as const;
export type Plan = (typeof PLANS)[number];

/** The plan of a new organization (the platform's), and of the installation's default organization. */
export const NEW_ORGANIZATION_PLAN: Plan = "free";
export const DEFAULT_ORGANIZATION_PLAN: Plan = "enterprise";

/**
 * Boolean features, each with the plans that include it. `addons.<type>` means the plan may select that
 * add-on (compute sizes above ci_micro, custom_domain, pitr). custom_domain and pitr are also a project's
 * through their add-on; Enterprise includes them outright.
 */
export const PLAN_FEATURES = {
  "projects.create": ["free", "pro", "team", "enterprise"],
  // The spec's plan markers: log drain create, read replica setup and the vanity subdomain need Pro, Team
  // or Enterprise; the backup schedule needs Enterprise.
  log_drains: ["pro", "team", "enterprise"],
  read_replicas: ["pro", "team", "enterprise"],
  vanity_subdomain: ["pro", "team", "enterprise"],
  backup_schedule: ["enterprise"],
  // The platform's documented rules: branching is a paid-plan feature; add-ons are bought on paid plans.
  branching: ["pro", "team", "enterprise"],
  "addons.compute": ["pro", "team", "enterprise"],
  "addons.custom_domain": ["pro", "team", "enterprise"],
  "addons.pitr": ["pro", "team", "enterprise"],
  custom_domain: ["enterprise"],
  pitr: ["enterprise"],
} as const satisfies Record<string, readonly Plan[]>;
export type Feature = keyof typeof PLAN_FEATURES;

/** How far back a log query may reach, in days (the platform's log retention per plan). */
export const LOG_RETENTION_DAYS: Record<Plan, number> = { free: 1, pro: 7, team: 28, enterprise: 90 };

/** Edge functions a project may have (the platform's per-plan limit; null: unlimited). */
export const FUNCTION_LIMITS: Record<Plan, number | null> = {
  free: 100,
  pro: 500,
  team: 1000,
  enterprise: null,
};

/** Features an add-on opens for its project (when the organization's plan may select it). */
const ADDON_FEATURES: Partial<Record<Feature, string>> = { custom_domain: "custom_domain", pitr: "pitr" };

export function isPlan(value: string): value is Plan {
  return (PLANS as readonly string[]).includes(value);
}

export function planHas(plan: string, feature: Feature): boolean {
  return isPlan(plan) && (PLAN_FEATURES[feature] as readonly Plan[]).includes(plan);
}

/** The smallest plan that includes `feature`, for the refusal's message. */
function lowestPlanWith(feature: Feature): Plan {
  return PLAN_FEATURES[feature][0];
}

/** The organization's entitlements in the spec's shape: plan features, and the log retention (numeric). */
export function entitlementsOf(plan: string) {
  const boolean = (Object.keys(PLAN_FEATURES) as Feature[]).map((key) => {
    const has = planHas(plan, key);
    return { feature: { key, type: "boolean" }, hasAccess: has, type: "boolean", config: { enabled: has } };
  });
  const days = isPlan(plan) ? LOG_RETENTION_DAYS[plan] : LOG_RETENTION_DAYS.free;
  const functions = isPlan(plan) ? FUNCTION_LIMITS[plan] : FUNCTION_LIMITS.free;
  return [
    ...boolean,
    ...(functions === null
      ? []
      : [
          {
            feature: { key: "function.max_count", type: "numeric" },
            hasAccess: true,
            type: "numeric",
            config: { enabled: true, value: functions },
          },
        ]),
    {
      feature: { key: "log.retention_days", type: "numeric" },
      hasAccess: true,
      type: "numeric",
      config: { enabled: true, value: days },
    },
  ];
}

export interface ProjectBilling {
  plan: Plan;
  organizationSlug: string;
  /** Selected add-ons: type → variant id. */
  addons: Record<string, string>;
}

/** The plan of the project's organization and the project's selected add-ons. */
export async function projectBilling(db: pg.Pool | pg.PoolClient, ref: string): Promise<ProjectBilling> {
  const { rows } = await db.query(
    `select o.plan, o.slug,
            (select s.value from platform.project_settings s where s.project_ref = p.ref and s.kind = 'addons') as addons
       from platform.projects p join platform.organizations o on o.id = p.organization_id
      where p.ref = $1`,
    [ref],
  );
  if (!rows[0]) throw new HttpError(404, `Project ${ref} not found`);
  const selected: { type: string; variant: { id: string } }[] = rows[0].addons?.selected ?? [];
  return {
    plan: isPlan(rows[0].plan) ? rows[0].plan : "free",
    organizationSlug: rows[0].slug,
    addons: Object.fromEntries(selected.map((s) => [s.type, s.variant.id])),
  };
}

/** True when the project may use `feature`: its plan includes it, or its add-on opens it. */
export function billingAllows(billing: ProjectBilling, feature: Feature): boolean {
  if (planHas(billing.plan, feature)) return true;
  const addon = ADDON_FEATURES[feature];
  return (
    addon !== undefined &&
    billing.addons[addon] !== undefined &&
    planHas(billing.plan, `addons.${addon}` as Feature)
  );
}

/**
 * Refuses (402, the spec's "plan or billing restriction", in the Management API's error format) a feature
 * the project's plan and add-ons do not give it. `status` 400 for the vanity subdomain, whose refusal the
 * spec lists as 400.
 */
export async function requireFeature(
  db: pg.Pool,
  ref: string,
  feature: Feature,
  status: 400 | 402 = 402,
): Promise<void> {
  const billing = await projectBilling(db, ref);
  if (billingAllows(billing, feature)) return;
  const addon = ADDON_FEATURES[feature];
  const how = addon
    ? `the ${addon} add-on (organization plan Pro or above) or the ${lowestPlanWith(feature)} plan`
    : `the ${lowestPlanWith(feature)} plan or above`;
  throw new HttpError(
    status,
    `Payment required: ${feature} needs ${how}; organization ${billing.organizationSlug} is on the ${billing.plan} plan`,
  );
}

/** Sets an organization's plan (the operator's command line); answers false when there is no such slug. */
export async function setOrganizationPlan(db: pg.Pool, slug: string, plan: Plan): Promise<boolean> {
  const { rowCount } = await db.query("update platform.organizations set plan = $2 where slug = $1", [
    slug,
    plan,
  ]);
  return rowCount === 1;
}

/** Refuses (402) a new edge function past the plan's limit; a function that exists may always be redeployed. */
export async function requireFunctionRoom(db: pg.Pool, ref: string, slug: string): Promise<void> {
  const billing = await projectBilling(db, ref);
  const limit = FUNCTION_LIMITS[billing.plan];
  if (limit === null) return;
  const { rows } = await db.query(
    `select exists (select from platform.edge_functions where project_ref = $1 and slug = $2) as known,
            (select count(*)::int from platform.edge_functions where project_ref = $1)
            + (select count(distinct slug)::int from platform.edge_function_bundles b
                where b.project_ref = $1
                  and not exists (select from platform.edge_functions f where f.project_ref = $1 and f.slug = b.slug)) as used`,
    [ref, slug],
  );
  if (rows[0].known || rows[0].used < limit) return;
  throw new HttpError(
    402,
    `Payment required: the ${billing.plan} plan allows ${limit} edge functions per project; organization ${billing.organizationSlug} has reached it`,
  );
}
