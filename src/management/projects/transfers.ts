import { Router, type Request } from "express";
import { z } from "zod";
import type { AppContext } from "../../context";
import { HttpError, roleGrants } from "../http";
import { findOrganization } from "../organizations/store";
import { planHas, projectBilling, type Feature } from "../billing/plans";
import { routeTable } from "../route";
import { moveProject, transferSource } from "./store";

/**
 * Project transfers between two organizations the caller administers. The project keeps its ref, database,
 * keys and host; its branches move with it. Members of the source organization lose access, members of the
 * target gain it with their roles there; OAuth tokens bound to the source organization stop reaching it.
 */

const transferBody = z.object({
  data: z.union([
    z.object({
      type: z.literal("project_transfer").optional(),
      attributes: z.object({ target_organization_slug: z.string().min(1).max(255) }),
    }),
    z.object({ target_organization_slug: z.string().min(1).max(255) }),
  ]),
});

const note = z.object({ key: z.string(), message: z.string() });
const previewResponse = z.object({
  data: z.object({
    type: z.literal("project_transfer_result"),
    attributes: z.object({
      valid: z.boolean(),
      warnings: z.array(note),
      errors: z.array(note),
      info: z.array(note),
    }),
  }),
});

type Note = z.infer<typeof note>;

interface Preview {
  valid: boolean;
  warnings: Note[];
  errors: Note[];
  info: Note[];
  targetId?: string;
}

const targetSlug = (body: z.infer<typeof transferBody>) =>
  "attributes" in body.data
    ? body.data.attributes.target_organization_slug
    : body.data.target_organization_slug;

async function preview(ctx: AppContext, req: Request, ref: string, slug: string): Promise<Preview> {
  const db = ctx.platformPool;
  const principal = req.principal!;
  const errors: Note[] = [];
  const warnings: Note[] = [];
  const info: Note[] = [];
  const source = await transferSource(db, ref);
  if (!roleGrants(req.membership!.role, "organization_admin_write"))
    errors.push({
      key: "source_organization_role",
      message: `Your role in ${source.slug} (${req.membership!.role}) cannot transfer its projects`,
    });
  const target = await findOrganization(db, principal.userId, slug, principal.organizationId);
  if (!target) {
    errors.push({ key: "target_organization", message: `Organization ${slug} not found` });
  } else if (target.id === source.organization_id) {
    errors.push({ key: "target_organization", message: `The project already belongs to ${slug}` });
  } else if (!roleGrants(target.role_name, "organization_admin_write")) {
    errors.push({
      key: "target_organization_role",
      message: `Your role in ${slug} (${target.role_name}) cannot receive projects: an Owner or Administrator can`,
    });
  }
  if (source.is_branch)
    errors.push({ key: "branch", message: "A branch moves with its parent project; transfer the parent" });
  if (target && target.plan !== source.plan)
    warnings.push({
      key: "plan",
      message: `The project moves from the ${source.plan} plan of ${source.slug} to the ${target.plan} plan of ${slug}`,
    });
  // Paid add-ons need a plan that may select them: the target's must, or the project cannot go there.
  if (target) {
    const { addons } = await projectBilling(db, ref);
    const lacking = Object.entries(addons).filter(
      ([type, variant]) =>
        variant !== "ci_micro" &&
        !planHas(target.plan, `addons.${type === "compute_instance" ? "compute" : type}` as Feature),
    );
    if (lacking.length)
      errors.push({
        key: "addons",
        message: `The ${target.plan} plan of ${slug} cannot hold the project's add-ons (${lacking.map(([, v]) => v).join(", ")}): remove them or change the plan`,
      });
  }
  if (source.branches > 0)
    warnings.push({ key: "branches", message: `The project's ${source.branches} branch(es) move with it` });
  info.push(
    { key: "data", message: "The database, its data, the API keys and the host stay as they are" },
    {
      key: "members",
      message: `Members of ${source.slug} lose access to the project; members of ${slug} reach it with their roles there`,
    },
  );
  return { valid: errors.length === 0, warnings, errors, info, targetId: target?.id };
}

export function transferRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx, { project: "any" });

  routes.post(
    "/v2/projects/:ref/transfers/previews",
    "Checks a transfer of the project to another organization (data.attributes.target_organization_slug)",
    {
      access: { permission: "project_admin_read" },
      body: transferBody,
      status: 200,
      response: previewResponse,
    },
    async ({ req, project, body }) => {
      const { valid, warnings, errors, info } = await preview(ctx, req, project.ref, targetSlug(body));
      return {
        data: { type: "project_transfer_result" as const, attributes: { valid, warnings, errors, info } },
      };
    },
  );

  routes.post(
    "/v2/projects/:ref/transfers",
    "Transfers the project (and its branches) to another organization the caller administers, keeping its data, keys and host",
    { access: { permission: "organization_admin_write" }, body: transferBody, status: 200 },
    async ({ req, project, body }) => {
      const checked = await preview(ctx, req, project.ref, targetSlug(body));
      if (!checked.valid) {
        const status = checked.errors.some(
          (e) => e.key === "target_organization" && /not found/.test(e.message),
        )
          ? 404
          : checked.errors.some((e) => e.key.endsWith("_role"))
            ? 403
            : 400;
        throw new HttpError(status, checked.errors.map((e) => e.message).join("; "));
      }
      // A valid preview found the target organization.
      await moveProject(ctx.platformPool, project.ref, checked.targetId!);
      return {};
    },
  );

  return routes.router;
}
