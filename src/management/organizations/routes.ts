import { Router } from "express";
import type { AppContext } from "../../context";
import { routeTable } from "../route";
import { entitlementsOf } from "../billing/plans";
import { cursorPage } from "./pagination";
import { BASE_ROLES, baseRoleOf, MEMBERS_READ } from "./roles";
import {
  createOrganizationBody,
  cursorPageQuery,
  entitlementsResponse,
  memberV1,
  memberV1Of,
  membersV2Response,
  organizationDetail,
  organizationSummary,
  rolesV2Response,
} from "./shapes";
import { createOrganization, listMembers, listOrganizations, type OrganizationRow } from "./store";

// As on the platform, an organization's public id is its slug: every route takes it, so the id a listing
// shows is one a client can pass back (`projects create --org-id`, `get_organization`).
const summary = (o: OrganizationRow) => ({ id: o.slug, slug: o.slug, name: o.name });

/** Organizations, their members and roles. */
export function organizationRoutes(ctx: AppContext): Router {
  const routes = routeTable(ctx);
  const db = ctx.platformPool;

  routes.post(
    "/v1/organizations",
    "Creates an organization; the caller becomes its owner",
    {
      access: { permission: "organizations_create" },
      body: createOrganizationBody,
      status: 201,
      response: organizationSummary,
    },
    async ({ req, body }) => summary(await createOrganization(db, req.principal!.userId, body.name)),
  );

  routes.get(
    "/v1/organizations",
    "Lists the caller's organizations",
    {
      access: { permission: "organizations_read", scope: "organizations:read" },
      status: 200,
      response: organizationSummary.array(),
    },
    async ({ req }) =>
      (await listOrganizations(db, req.principal!.userId, req.principal!.organizationId)).map(summary),
  );

  routes.get(
    "/v1/organizations/:slug",
    "Gets an organization",
    {
      organization: true,
      access: { permission: "organization_admin_read", scope: "organizations:read" },
      status: 200,
      response: organizationDetail,
    },
    async ({ organization: org }) => ({
      id: org.slug,
      name: org.name,
      plan: org.plan,
      opt_in_tags: [],
      allowed_release_channels: ["ga"],
    }),
  );

  routes.get(
    "/v1/organizations/:slug/entitlements",
    "Lists the features the organization's plan gives its projects (billing/plans.ts; add-ons open custom_domain and pitr per project)",
    {
      organization: true,
      access: { permission: "organization_admin_read", scope: "organizations:read" },
      status: 200,
      response: entitlementsResponse,
    },
    async ({ organization: org }) => ({ entitlements: entitlementsOf(org.plan) }),
  );

  routes.get(
    "/v1/organizations/:slug/members",
    "Lists the organization's members",
    {
      organization: true,
      access: MEMBERS_READ,
      status: 200,
      response: memberV1.array(),
    },
    async ({ organization: org }) => (await listMembers(db, org.id)).map(memberV1Of),
  );

  routes.get(
    "/v2/organizations/:slug/members",
    "Lists the organization's members, cursor-paginated",
    {
      organization: true,
      access: MEMBERS_READ,
      query: cursorPageQuery,
      status: 200,
      response: membersV2Response,
    },
    async ({ organization: org, query }) => {
      const members = (await listMembers(db, org.id)).map((m) => {
        const role = baseRoleOf(m.role_name);
        return {
          type: "organization_member" as const,
          id: m.user_id,
          attributes: {
            username: m.username,
            primary_email: m.email,
            mfa_enabled: false,
            is_sso_user: false,
            avatar_url: "",
            roles: [{ id: role.id, name: role.name, scope: "organization", projects: [] }],
          },
        };
      });
      return cursorPage(members, query, `/v2/organizations/${encodeURIComponent(org.slug)}/members`);
    },
  );

  routes.get(
    "/v2/organizations/:slug/roles",
    "Lists the organization's roles, cursor-paginated",
    {
      organization: true,
      access: MEMBERS_READ,
      query: cursorPageQuery,
      status: 200,
      response: rolesV2Response,
    },
    async ({ organization: org, query }) => {
      const roles = BASE_ROLES.map((r) => ({
        type: "organization_role" as const,
        id: String(r.id),
        attributes: { name: r.name, scope: "organization", base_role_id: r.id, projects: [] },
      }));
      return cursorPage(roles, query, `/v2/organizations/${encodeURIComponent(org.slug)}/roles`);
    },
  );

  return routes.router;
}
