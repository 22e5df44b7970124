import pg from "pg";
import { applyBootstrap } from "../db/bootstrap";
import { ensureLoginPassword } from "../db/loginRoles";
import { withDatabase } from "../db/urls";
import { runUtilityStatement } from "../db/utility";
import type { KeyEncryptionKey } from "../platform/kek";
import { CATALOG_ONLY_SESSION, oneOffClient } from "../db/client";

/** A Postgres cluster projects live on (a row of platform.clusters). */
export interface Cluster {
  id: string;
  region: string;
  /** Superuser URL of the cluster's maintenance database. */
  adminUrl: string;
  authenticatorPassword: string;
}

export function clusterOfRow(
  row: { cluster_id: string; region: string; admin_url: string; authenticator_password: string },
  kek: KeyEncryptionKey,
): Cluster {
  return {
    id: row.cluster_id,
    region: row.region,
    adminUrl: kek.open(row.admin_url, "platform.clusters.admin_url"),
    authenticatorPassword: kek.open(row.authenticator_password, "platform.clusters.authenticator_password"),
  };
}

/** The login a project's data requests use (a member of the cluster-wide `authenticator`). */
export const projectAuthenticator = (ref: string): string => `authenticator_${ref}`;

/** Runs `work` on a superuser connection to the cluster's maintenance database. */
async function onCluster<T>(cluster: Cluster, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = oneOffClient({ connectionString: cluster.adminUrl, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

const versions = new Map<string, Promise<string>>();

/** The cluster's server version, e.g. `17.6`; asked once per process. */
export function clusterVersion(cluster: Cluster): Promise<string> {
  let version = versions.get(cluster.id);
  if (!version) {
    version = onCluster(cluster, async (c) => (await c.query("show server_version")).rows[0].server_version);
    versions.set(cluster.id, version);
    version.catch(() => versions.delete(cluster.id));
  }
  return version;
}

/**
 * Creates a project's database on its cluster and applies the same bootstrap as the default project (roles,
 * auth helpers, grants, DDL watch). The cluster-wide `authenticator` gets the password the control plane
 * keeps for the cluster, so data requests can log in.
 */
export async function createProjectDatabase(cluster: Cluster, database: string): Promise<void> {
  await onCluster(cluster, async (c) => {
    await runUtilityStatement(c, "create database %I", [database]);
  });
  await retryingRoleChanges(() => applyBootstrap(withDatabase(cluster.adminUrl, database), ["project"]));
  await ensureLoginPassword(
    withDatabase(cluster.adminUrl, database),
    "authenticator",
    cluster.authenticatorPassword,
  );
}

/**
 * Brings an opened project's database up to date: bootstrap files added since it was created, then its own
 * roles (sql/project/010_project_roles.sql): owner, SQL login and read-only login, CONNECT for them only; the
 * login its data requests use (sql/project/650_project_authenticator.sql), with the cluster's authenticator
 * password; the owner's privileges on the database modules (sql/project/739_module_grants.sql); and, given its
 * password, the auth service's login (sql/project/640_auth_role.sql; a project moved to another cluster gets it
 * when it is next opened).
 */
export async function prepareProjectDatabase(
  databaseUrl: string,
  roles: {
    ref: string;
    sqlPassword: string;
    readPassword: string;
    authenticatorPassword: string;
    authPassword?: string;
  },
): Promise<void> {
  await retryingRoleChanges(() => applyBootstrap(databaseUrl, ["project"]));
  await retryingRoleChanges(async () => {
    const client = oneOffClient({
      connectionString: databaseUrl,
      options: CATALOG_ONLY_SESSION,
      connectionTimeoutMillis: 10_000,
    });
    await client.connect();
    try {
      await client.query("select _strata.ensure_project_roles($1, $2, $3)", [
        roles.ref,
        roles.sqlPassword,
        roles.readPassword,
      ]);
      await client.query("select _strata.ensure_project_authenticator($1, $2)", [
        roles.ref,
        roles.authenticatorPassword,
      ]);
      // The owner's privileges on cron, net, vault and `extensions` (sql/project/739_module_grants.sql).
      await client.query("select _strata.grant_modules($1)", [roles.ref]);
      if (roles.authPassword !== undefined) {
        await client.query("select _strata.ensure_auth_role($1, $2)", [roles.ref, roles.authPassword]);
      }
      // The owner adds its tables to realtime's publication (`alter publication supabase_realtime add table`),
      // as the platform's postgres does: that needs the publication to be the owner's.
      const { rows } = await client.query(
        "select exists (select from pg_publication where pubname = 'supabase_realtime') as present",
      );
      if (rows[0].present) {
        await runUtilityStatement(client, "alter publication supabase_realtime owner to %I", [
          `postgres_${roles.ref}`,
        ]);
      }
    } finally {
      await client.end().catch(() => {});
    }
  });
}

/**
 * Runs `work`, which changes cluster-wide roles (the role grants of the project bootstrap). Roles are shared by every database of the cluster, so several projects may be set up at
 * once; Postgres refuses the loser ("tuple concurrently updated"), which then tries again.
 */
async function retryingRoleChanges<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (e) {
      if (attempt >= 20 || !/tuple concurrently updated/.test((e as Error).message)) throw e;
      await new Promise((r) => setTimeout(r, 20 + Math.random() * 200));
    }
  }
}

/** Drops a project's database, ending its sessions first. */
export async function dropProjectDatabase(cluster: Cluster, database: string): Promise<void> {
  await onCluster(cluster, async (c) => {
    await runUtilityStatement(c, "drop database if exists %I with (force)", [database]);
  });
}

/**
 * Drops a deleted project's roles (after its database): owner, SQL, read-only, data and auth logins, temporary and
 * just-in-time logins.
 */
export async function dropProjectRoles(cluster: Cluster, ref: string): Promise<void> {
  await onCluster(cluster, async (c) => {
    const { rows } = await c.query(
      `select rolname from pg_roles
        where rolname = any($1) or starts_with(rolname, $2) or starts_with(rolname, $3)`,
      [
        [
          `postgres_${ref}`,
          `strata_sql_${ref}`,
          `strata_read_${ref}`,
          `strata_auth_${ref}`,
          projectAuthenticator(ref),
        ],
        `cli_login_${ref}_`,
        `jit_${ref}_`,
      ],
    );
    for (const { rolname } of rows) await runUtilityStatement(c, "drop role if exists %I", [rolname]);
  });
}

/** Pausing: the database refuses every new connection and its open sessions are ended. */
export async function closeProjectDatabase(cluster: Cluster, database: string): Promise<void> {
  await onCluster(cluster, async (c) => {
    await runUtilityStatement(c, "alter database %I with allow_connections false", [database]);
    await c.query(
      "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()",
      [database],
    );
  });
}

/** Restoring: the database accepts connections again; answers once one succeeds. */
export async function openProjectDatabase(cluster: Cluster, database: string): Promise<void> {
  await onCluster(cluster, async (c) => {
    await runUtilityStatement(c, "alter database %I with allow_connections true", [database]);
  });
  const probe = oneOffClient({ connectionString: withDatabase(cluster.adminUrl, database) });
  await probe.connect();
  await probe.end();
}

/**
 * `db_pass` of a new project: the password its owner role (the platform's `postgres`, the pooler's user)
 * logs in with. The password itself is kept nowhere.
 */
export async function setOwnerLogin(cluster: Cluster, ref: string, password: string): Promise<void> {
  await onCluster(cluster, async (c) => {
    await runUtilityStatement(c, "alter role %I with login password %L", [`postgres_${ref}`, password]);
  });
}
