import type { ProjectRuntime } from "../projects/runtime";

/**
 * The settings that bound a data request's cost, applied to every data transaction as the role's own settings
 * are in PostgREST (`set role` alone applies none): the platform's timeouts per API role, overridden by the
 * project database's own values (`ALTER DATABASE ... SET`, written by PUT .../config/database/postgres).
 *
 * The roles' own settings (`alter role anon [in database ...] set ...`, pg_db_role_setting with a role) are not
 * read: anon, authenticated, service_role and authenticator are shared by every project of the cluster, and
 * PostgreSQL lets any role change its own defaults in every database, which the owner of any project may do
 * after `set role anon`. A database's own settings are written only by its owner, Strata's superuser.
 */

const APPLIED = new Set(["statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"]);
/** The platform's timeouts, so a slow or hostile query cannot hold the data connections. */
const PLATFORM_DEFAULTS = new Map<string, Record<string, string>>([
  ["anon", { statement_timeout: "3s" }],
  ["authenticated", { statement_timeout: "8s" }],
]);

async function loadDatabaseSettings(project: ProjectRuntime): Promise<Record<string, string>> {
  const { rows } = await project.adminPool.query<{ setconfig: string[] }>(
    `select s.setconfig from pg_db_role_setting s
      where s.setrole = 0 and s.setdatabase = (select oid from pg_database where datname = current_database())`,
  );
  const own: Record<string, string> = {};
  for (const entry of rows[0]?.setconfig ?? []) {
    const at = entry.indexOf("=");
    const name = entry.slice(0, at);
    if (APPLIED.has(name)) own[name] = entry.slice(at + 1);
  }
  return own;
}

/** The role's settings; the database's are cached with the project's schema caches (reloaded after DDL). */
export async function roleSettingsOf(project: ProjectRuntime, role: string): Promise<Record<string, string>> {
  let cached = project.caches.get("catalog:roleSettings") as Promise<Record<string, string>> | undefined;
  if (!cached) {
    cached = loadDatabaseSettings(project);
    project.caches.set("catalog:roleSettings", cached);
    cached.catch(() => project.caches.delete("catalog:roleSettings"));
  }
  return { ...PLATFORM_DEFAULTS.get(role), ...(await cached) };
}
