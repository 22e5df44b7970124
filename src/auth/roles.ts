import type { ProjectRuntime } from "../projects/runtime";

/** Roles created or granted rarely: the list is kept briefly rather than read on every request. */
const ROLES_TTL_MS = 5_000;
const cached = new WeakMap<ProjectRuntime, { at: number; roles: Set<string> }>();

/** The roles `authenticator` may switch to (its memberships), read from pg_auth_members. */
export async function assumableRoles(project: ProjectRuntime): Promise<Set<string>> {
  const hit = cached.get(project);
  if (hit && Date.now() - hit.at < ROLES_TTL_MS) return hit.roles;
  const { rows } = await project.adminPool.query(
    `select r.rolname from pg_auth_members m
       join pg_roles r on r.oid = m.roleid
       join pg_roles u on u.oid = m.member
      where u.rolname = 'authenticator'`,
  );
  const roles = new Set<string>(rows.map((r) => r.rolname));
  cached.set(project, { at: Date.now(), roles });
  return roles;
}
