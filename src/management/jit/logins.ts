import { withAdminTransaction } from "../../db/transaction";
import { runUtilityStatement } from "../../db/utility";
import { jitLoginRole } from "../../projects/access";
import type { ProjectRuntime } from "../../projects/runtime";

/** The login roles just-in-time access makes in a project's database (Strata-written statements only). */

/** The platform's role names and the project's roles they stand for. */
function databaseRole(project: ProjectRuntime, role: string): string {
  if (role === "postgres") return project.record.ownerRole;
  if (role === "supabase_read_only_user") return `strata_read_${project.ref}`;
  return role;
}

export function loginRole(project: ProjectRuntime, userId: string, role: string): string {
  return jitLoginRole(project.ref, userId, role);
}

/**
 * Makes (or renews) `login`: a member of the project's role `role`, with CONNECT on the project's database
 * only, whose password Postgres accepts until `until`.
 */
export async function issueLogin(
  project: ProjectRuntime,
  login: string,
  role: string,
  password: string,
  until: Date,
): Promise<void> {
  const database = decodeURIComponent(new URL(project.record.adminUrl).pathname.slice(1));
  await withAdminTransaction(project.adminPool, async (client) => {
    const exists = await client.query("select from pg_roles where rolname = $1", [login]);
    await runUtilityStatement(
      client,
      exists.rowCount
        ? "alter role %I login password %L valid until %L"
        : "create role %I login password %L valid until %L",
      [login, password, until.toISOString()],
    );
    await runUtilityStatement(client, "grant %I to %I", [databaseRole(project, role), login]);
    await runUtilityStatement(client, "grant connect on database %I to %I", [database, login]);
  });
}

/** Drops the login roles made for a user (all of them, or those of roles no longer mapped). */
export async function dropLogins(
  project: ProjectRuntime,
  userId: string,
  keep: string[] = [],
): Promise<void> {
  const prefix = loginRole(project, userId, "");
  const { rows } = await project.adminPool.query(
    "select rolname from pg_roles where starts_with(rolname, $1)",
    [prefix],
  );
  const drop = rows.map((r) => r.rolname as string).filter((r) => !keep.includes(r.slice(prefix.length)));
  if (!drop.length) return;
  await withAdminTransaction(project.adminPool, async (client) => {
    for (const role of drop) {
      await client.query("select pg_terminate_backend(pid) from pg_stat_activity where usename = $1", [role]);
      await runUtilityStatement(client, "drop owned by %I", [role]);
      await runUtilityStatement(client, "drop role %I", [role]);
    }
  });
}
