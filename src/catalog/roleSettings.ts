import type { ProjectRuntime } from "../projects/runtime";

/**
 * Settings a role carries in its database (`alter role anon set statement_timeout = '3s'`), applied to every
 * data transaction that runs as the role, as PostgREST does: `set role` alone does not apply them. Only the
 * settings that bound a request's cost are taken.
 */

const APPLIED = new Set(["statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"]);
type RoleSettings = Map<string, Record<string, string>>;

async function loadRoleSettings(project: ProjectRuntime): Promise<RoleSettings> {
  // Settings for the role in this database win over the role's settings for every database.
  const { rows } = await project.adminPool.query<{ rolname: string; setconfig: string[] }>(
    `select r.rolname, s.setconfig from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
      where s.setdatabase in (0, (select oid from pg_database where datname = current_database()))
      order by s.setdatabase`,
  );
  const settings: RoleSettings = new Map();
  for (const { rolname, setconfig } of rows) {
    const own = settings.get(rolname) ?? {};
    for (const entry of setconfig) {
      const at = entry.indexOf("=");
      const name = entry.slice(0, at);
      if (APPLIED.has(name)) own[name] = entry.slice(at + 1);
    }
    settings.set(rolname, own);
  }
  return settings;
}

/** The role's settings, cached with the project's schema caches (a restart or schema change reloads them). */
export async function roleSettingsOf(project: ProjectRuntime, role: string): Promise<Record<string, string>> {
  let cached = project.caches.get("catalog:roleSettings") as Promise<RoleSettings> | undefined;
  if (!cached) {
    cached = loadRoleSettings(project);
    project.caches.set("catalog:roleSettings", cached);
    cached.catch(() => project.caches.delete("catalog:roleSettings"));
  }
  return (await cached).get(role) ?? {};
}
