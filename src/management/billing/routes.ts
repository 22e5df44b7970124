import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { HttpError } from "../http";
import { touchProject } from "../projects/store";
import { routeTable } from "../route";
import { readSettings, writeSettings } from "../../projects/settings";
import { applyConnectionLimit, BASELINE, COMPUTE_SIZES, computeSize } from "./compute";
import { releaseHostname } from "../domains/store";
import { billingAllows, planHas, projectBilling, type Feature } from "./plans";

/**
 * Billing add-ons of a project. Strata charges nothing (`amount` 0); selecting one acts: a compute size
 * sizes the project's data pool and its owner's connection limit (compute.ts), custom_domain opens custom
 * hostnames and pitr point-in-time restores within its variant's days. Every add-on but the smallest
 * compute size needs an organization plan that may select it (402 otherwise).
 */

const price = { amount: 0, description: "self-hosted", type: "fixed", interval: "monthly" };
const PITR_DAYS = { pitr_7: 7, pitr_14: 14, pitr_28: 28 } as const;

const AVAILABLE = [
  {
    type: "compute_instance",
    name: "Compute size",
    variants: COMPUTE_SIZES.map((s) => ({
      id: s.id,
      name: s.name,
      price,
      meta: { default_pool_size: s.pool, max_connections: s.connections },
    })),
  },
  {
    type: "custom_domain",
    name: "Custom domain",
    variants: [{ id: "cd_default", name: "Custom domain", price, meta: null }],
  },
  {
    type: "pitr",
    name: "Point in time recovery",
    variants: Object.entries(PITR_DAYS).map(([id, days]) => ({
      id,
      name: `${days} days`,
      price,
      meta: { backup_duration_days: days },
    })),
  },
];
type Variant = (typeof AVAILABLE)[number]["variants"][number];

interface AddonsDoc {
  selected: { type: string; variant: { id: string } }[];
  /** The compute size before the current one: DELETE rolls back to it. */
  previous_compute: string | null;
}
const ADDONS: AddonsDoc = { selected: [], previous_compute: null };

const variantShape = z.object({
  id: z.string(),
  name: z.string(),
  price: z.object({
    description: z.string(),
    type: z.string(),
    interval: z.string(),
    amount: z.number().int(),
  }),
  meta: z.record(z.string(), z.unknown()).nullable(),
});

/** The days of restore window the project's pitr add-on gives (undefined: none selected). */
export async function pitrDays(ctx: AppContext, ref: string): Promise<number | undefined> {
  const id = (await projectBilling(ctx.platformPool, ref)).addons.pitr as keyof typeof PITR_DAYS | undefined;
  return id ? PITR_DAYS[id] : undefined;
}

function variantOf(type: string, id: string): Variant | undefined {
  return AVAILABLE.find((a) => a.type === type)?.variants.find((v) => v.id === id);
}

/** Sizes the project's pools and connections for `sizeId` (undefined: Strata's baseline). */
async function applyCompute(ctx: AppContext, project: ProjectRuntime, sizeId: string | undefined) {
  const size = computeSize(sizeId) ?? BASELINE;
  const client = await project.adminPool.connect();
  try {
    await applyConnectionLimit(client, project.ref, size.connections);
  } finally {
    client.release();
  }
  await writeSettings(ctx, project.ref, "pooler", {}, { default_pool_size: size.pool });
  // Every node drops the project's runtime (this one at once); the next request opens a pool of the new size.
  await touchProject(ctx.platformPool, project.ref);
  await ctx.registry.retire(project.ref);
}

function requireDatabase(project: ProjectRuntime): void {
  if (project.record.status !== "ACTIVE_HEALTHY")
    throw new HttpError(400, `Project ${project.ref} is ${project.record.status}: restore it first`);
}

export function billingRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });
  const path = "/v1/projects/:ref/billing/addons";
  const load = (ref: string) => readSettings(ctx, ref, "addons", ADDONS);
  const save = (ref: string, doc: AddonsDoc) => writeSettings(ctx, ref, "addons", ADDONS, doc);

  routes.get(
    path,
    "Lists the project's selected add-ons (applied) and those its organization's plan may select",
    {
      access: { permission: "infra_add_ons_read" },
      status: 200,
      response: z.object({
        selected_addons: z.array(z.object({ type: z.string(), variant: variantShape })),
        available_addons: z.array(
          z.object({ type: z.string(), name: z.string(), variants: z.array(variantShape) }),
        ),
      }),
    },
    async ({ project }) => {
      const { plan } = await projectBilling(ctx.platformPool, project.ref);
      const doc = await load(project.ref);
      return {
        selected_addons: doc.selected.flatMap((s) => {
          const variant = variantOf(s.type, s.variant.id);
          return variant ? [{ type: s.type, variant }] : [];
        }),
        available_addons: AVAILABLE.map((a) => ({
          ...a,
          variants: a.variants.filter(
            (v) => v.id === "ci_micro" || planHas(plan, `addons.${addonFeature(a.type)}` as Feature),
          ),
        })).filter((a) => a.variants.length > 0),
      };
    },
  );

  routes.patch(
    path,
    "Selects an add-on variant and applies it (compute: pool size and connection limit); 402 when the plan may not select it",
    {
      access: { permission: "infra_add_ons_write" },
      body: z.object({
        addon_type: z.enum(["compute_instance", "custom_domain", "pitr"]),
        addon_variant: z.string().min(1),
      }),
      status: 200,
      response: z.object({}),
    },
    async ({ project, body }) => {
      const variant = variantOf(body.addon_type, body.addon_variant);
      if (!variant)
        throw new HttpError(400, `Unknown variant ${body.addon_variant} of add-on ${body.addon_type}`);
      const billing = await projectBilling(ctx.platformPool, project.ref);
      const feature = `addons.${addonFeature(body.addon_type)}` as Feature;
      if (variant.id !== "ci_micro" && !planHas(billing.plan, feature)) {
        throw new HttpError(
          402,
          `Payment required: the ${body.addon_type} add-on ${variant.id} needs the pro plan or above; organization ${billing.organizationSlug} is on the ${billing.plan} plan`,
        );
      }
      const doc = await load(project.ref);
      const current = doc.selected.find((s) => s.type === body.addon_type)?.variant.id;
      if (body.addon_type === "compute_instance" && current !== variant.id) {
        requireDatabase(project);
        await applyCompute(ctx, project, variant.id);
      }
      await save(project.ref, {
        selected: [
          ...doc.selected.filter((s) => s.type !== body.addon_type),
          { type: body.addon_type, variant: { id: variant.id } },
        ],
        previous_compute:
          body.addon_type === "compute_instance" && current !== variant.id
            ? (current ?? null)
            : doc.previous_compute,
      });
      return {};
    },
  );

  routes.delete(
    `${path}/:variant`,
    "Removes an add-on variant; removing a compute size rolls compute back to the previous size (or Strata's baseline)",
    { access: { permission: "infra_add_ons_write" }, status: 200, response: z.object({}) },
    async ({ project, params }) => {
      const doc = await load(project.ref);
      const removed = doc.selected.find((s) => s.variant.id === params.variant);
      if (!removed) throw new HttpError(404, `Add-on variant ${params.variant} is not selected`);
      let selected = doc.selected.filter((s) => s !== removed);
      let previous = doc.previous_compute;
      if (removed.type === "compute_instance") {
        requireDatabase(project);
        const back = previous && previous !== removed.variant.id ? previous : undefined;
        await applyCompute(ctx, project, back);
        if (back) selected = [...selected, { type: "compute_instance", variant: { id: back } }];
        previous = null;
      }
      await save(project.ref, { selected, previous_compute: previous });
      // Without the add-on (and a plan that includes the feature) the custom hostname is no longer served.
      if (
        removed.type === "custom_domain" &&
        !billingAllows(await projectBilling(ctx.platformPool, project.ref), "custom_domain")
      ) {
        await releaseHostname(ctx.platformPool, project.ref, "custom");
        await ctx.registry.hostnames.reload();
      }
      return {};
    },
  );
  return routes.router;
}

function addonFeature(type: string): string {
  return type === "compute_instance" ? "compute" : type;
}
