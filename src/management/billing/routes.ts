import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { route } from "../route";
import { readSettings, writeSettings } from "../settings";

/** Billing add-ons: a self-hosted installation has no billing, so add-ons are recorded choices only. */
const AVAILABLE = [
  {
    type: "compute_instance",
    name: "Compute size",
    variants: [
      {
        id: "ci_micro",
        name: "Micro",
        price: { amount: 0, description: "self-hosted", type: "fixed", interval: "monthly" },
      },
    ],
  },
  {
    type: "pitr",
    name: "Point in time recovery",
    variants: [
      {
        id: "pitr_7",
        name: "7 days",
        price: { amount: 0, description: "self-hosted", type: "fixed", interval: "monthly" },
      },
    ],
  },
  {
    type: "custom_domain",
    name: "Custom domain",
    variants: [
      {
        id: "cd_default",
        name: "Custom domain",
        price: { amount: 0, description: "self-hosted", type: "fixed", interval: "monthly" },
      },
    ],
  },
];
type Selected = { type: string; variant: { id: string; name: string } };

export function billingRoutes(ctx: AppContext): Router {
  const router = Router({ caseSensitive: true });
  const path = "/v1/projects/:ref/billing/addons";
  const load = async (ref: string) =>
    (await readSettings(ctx, ref, "addons", { selected: [] as Selected[] })).selected;
  route(
    ctx,
    router,
    {
      method: "get",
      project: "any",
      path,
      summary: "Lists selected and available add-ons",
      access: { permission: "infra_add_ons_read" },
      status: 200,
    },
    async ({ project }) => ({
      selected_addons: await load(project.ref),
      available_addons: AVAILABLE,
    }),
  );
  route(
    ctx,
    router,
    {
      method: "patch",
      project: "any",
      path,
      summary: "Selects an add-on variant",
      access: { permission: "infra_add_ons_write" },
      body: z.object({ addon_type: z.string(), addon_variant: z.string() }),
      status: 200,
    },
    async ({ project, body }) => {
      const addon = AVAILABLE.find((a) => a.type === body.addon_type);
      const variant = addon?.variants.find((v) => v.id === body.addon_variant);
      if (!addon || !variant)
        throw new HttpError(400, `Unknown add-on ${body.addon_type}/${body.addon_variant}`);
      const selected = (await load(project.ref)).filter((s) => s.type !== addon.type);
      await writeSettings(
        ctx,
        project.ref,
        "addons",
        { selected: [] as Selected[] },
        { selected: [...selected, { type: addon.type, variant: { id: variant.id, name: variant.name } }] },
      );
      return {};
    },
  );
  route(
    ctx,
    router,
    {
      method: "delete",
      project: "any",
      path: `${path}/:variant`,
      summary: "Removes an add-on",
      access: { permission: "infra_add_ons_write" },
      status: 200,
    },
    async ({ project, params }) => {
      const selected = (await load(project.ref)).filter((s) => s.variant.id !== params.variant);
      await writeSettings(ctx, project.ref, "addons", { selected: [] as Selected[] }, { selected });
      return {};
    },
  );
  return router;
}
