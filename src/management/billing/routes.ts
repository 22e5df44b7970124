import { Router } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError } from "../http";
import { projectOf } from "../projectOf";
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
  const router = Router();
  const path = "/v1/projects/:ref/billing/addons";
  const load = async (ref: string) =>
    (await readSettings(ctx, ref, "addons", { selected: [] as Selected[] })).selected;
  route(
    router,
    {
      method: "get",
      path,
      summary: "Lists selected and available add-ons",
      access: { permission: "infra_add_ons_read" },
      status: 200,
    },
    async ({ params }) => ({
      selected_addons: await load((await projectOf(ctx, params.ref)).ref),
      available_addons: AVAILABLE,
    }),
  );
  route(
    router,
    {
      method: "patch",
      path,
      summary: "Selects an add-on variant",
      access: { permission: "infra_add_ons_write" },
      body: z.object({ addon_type: z.string(), addon_variant: z.string() }),
      status: 200,
    },
    async ({ params, body }) => {
      const project = await projectOf(ctx, params.ref);
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
    router,
    {
      method: "delete",
      path: `${path}/:variant`,
      summary: "Removes an add-on",
      access: { permission: "infra_add_ons_write" },
      status: 200,
    },
    async ({ params }) => {
      const project = await projectOf(ctx, params.ref);
      const selected = (await load(project.ref)).filter((s) => s.variant.id !== params.variant);
      await writeSettings(ctx, project.ref, "addons", { selected: [] as Selected[] }, { selected });
      return {};
    },
  );
  return router;
}
