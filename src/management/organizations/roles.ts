/** The organization roles every organization has; members carry one of them (organization_members.role_name). */
export const BASE_ROLES = [
  { id: 1, name: "Owner" },
  { id: 2, name: "Administrator" },
  { id: 3, name: "Developer" },
  { id: 4, name: "Read-only" },
] as const;

export function baseRoleOf(name: string): { id: number; name: string } {
  return BASE_ROLES.find((r) => r.name === name) ?? { id: 0, name };
}
