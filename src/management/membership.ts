import type { RequestHandler } from "express";
import type { AppContext } from "../context";
import { found, HttpError, type Principal } from "./http";
import { findOrganization, type OrganizationRow } from "./organizations/store";
import { addressedBy } from "./paths";

/**
 * Every request addressing a project (`/v1/projects/{ref}/...`) or an organization (`/v1/organizations/{slug}/...`)
 * must come from a member of its organization: others get 404, as if it did not exist. The member's role is
 * kept on the request; `route()` checks it against the endpoint's permission.
 */
export function resolveMembership(ctx: AppContext): RequestHandler {
  return async (req, _res, next) => {
    try {
      const { project: ref, organization: slug } = addressedBy(req.originalUrl.split("?")[0]);
      if (ref) {
        const { rows } = await ctx.platformPool.query(
          `select m.role_name from platform.projects p
             join platform.organization_members m on m.organization_id = p.organization_id and m.user_id = $1
            where p.ref = $2 and ($3::uuid is null or p.organization_id = $3)`,
          [req.principal!.userId, ref, req.principal!.organizationId],
        );
        if (!rows[0]) throw new HttpError(404, `Project ${ref} not found`);
        req.membership = { role: rows[0].role_name, project: ref };
      } else if (slug) {
        const { rows } = await ctx.platformPool.query(
          `select m.role_name from platform.organizations o
             join platform.organization_members m on m.organization_id = o.id and m.user_id = $1
            where o.slug = $2 and ($3::uuid is null or o.id = $3)`,
          [req.principal!.userId, decodeURIComponent(slug), req.principal!.organizationId],
        );
        if (!rows[0]) throw new HttpError(404, `Organization ${slug} not found`);
        req.membership = { role: rows[0].role_name, organization: decodeURIComponent(slug) };
      }
      next();
    } catch (e) {
      next(e);
    }
  };
}

/** The organization `slug` the caller belongs to (an OAuth token: the one it was issued for), else 404. */
export async function organizationOf(
  ctx: AppContext,
  caller: Pick<Principal, "userId" | "organizationId">,
  slug: string,
): Promise<OrganizationRow> {
  return found(
    await findOrganization(ctx.platformPool, caller.userId, slug, caller.organizationId),
    "Organization",
    slug,
  );
}
