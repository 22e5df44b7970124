import { HttpError } from "../http";

/** The organization roles every organization has; members carry one of them (organization_members.role_name). */
export const ROLE_NAMES = ["Owner", "Administrator", "Developer", "Read-only"] as const;

/** The roles with the platform's ids (1 to 4, in that order). */
export const BASE_ROLES = ROLE_NAMES.map((name, i) => ({ id: i + 1, name }));

/** The access rule of the routes that list an organization's members, invitations and roles. */
export const MEMBERS_READ = { permission: "members_read", scope: "organizations:read" } as const;

export function baseRoleOf(name: string): { id: number; name: string } {
  return BASE_ROLES.find((r) => r.name === name) ?? { id: 0, name };
}

/**
 * Refuses (403) a member of role `actor` giving, changing or taking away role `role`: an Administrator
 * manages every role but Owner, as on the platform (the route's `organization_admin_write` already kept
 * Developers and Read-only members out).
 */
export function checkManagesRole(actor: string, role: string): void {
  if (role === "Owner" && actor !== "Owner")
    throw new HttpError(403, "Forbidden: only an Owner may invite, change or remove an Owner");
}
