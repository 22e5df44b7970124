import type { ProjectRuntime } from "../projects/runtime";

/** Memberships change rarely: a known role is trusted for a few seconds; an unknown one is always re-read. */
const ROLES_TTL_MS = 5_000;
const cached = new WeakMap<ProjectRuntime, { at: number; roles: Set<string> }>();

/**
 * A read of a project's memberships under way: when the known roles expire, the requests arriving meanwhile
 * wait for it instead of each reading (all of a pool's connections at once).
 */
const reading = new WeakMap<ProjectRuntime, Promise<Set<string>>>();

/** The roles `authenticator` may switch to, read once for every request that needs them at the same moment. */
function assumableRoles(project: ProjectRuntime): Promise<Set<string>> {
  let read = reading.get(project);
  if (read === undefined) {
    read = readAssumableRoles(project).finally(() => reading.delete(project));
    reading.set(project, read);
  }
  return read;
}

/** The roles `authenticator` may switch to (its memberships), read from pg_auth_members. */
async function readAssumableRoles(project: ProjectRuntime): Promise<Set<string>> {
  const { rows } = await project.authPool.query(
    `select r.rolname from pg_auth_members m
       join pg_roles r on r.oid = m.roleid
       join pg_roles u on u.oid = m.member
      where u.rolname = 'authenticator'`,
  );
  const roles = new Set<string>(rows.map((r) => r.rolname));
  cached.set(project, { at: Date.now(), roles });
  return roles;
}

/** Whether the authenticator may assume `role` (a role granted a moment ago counts at once). */
export async function canAssume(project: ProjectRuntime, role: string): Promise<boolean> {
  const hit = cached.get(project);
  if (hit && Date.now() - hit.at < ROLES_TTL_MS && hit.roles.has(role)) return true;
  // A known role past its time joins a read under way; an unknown one reads afresh (granted a moment ago).
  const roles = hit?.roles.has(role) ? await assumableRoles(project) : await readAssumableRoles(project);
  return roles.has(role);
}
