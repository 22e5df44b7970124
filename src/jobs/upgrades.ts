import { PassThrough } from "node:stream";
import type pg from "pg";
import type { AppContext } from "../context";
import { CATALOG_ONLY_SESSION, oneOffClient } from "../db/client";
import type { PostgresBinaries } from "../db/embeddedCluster";
import { withCredentials, withDatabase } from "../db/urls";
import { runUtilityStatement } from "../db/utility";
import { kekOf } from "../platform/kek";
import {
  clusterOfRow,
  createProjectDatabase,
  dropProjectDatabase,
  dropProjectRoles,
  prepareProjectDatabase,
  type Cluster,
} from "../projects/clusters";
import { withOwnerLoad } from "../projects/ownerLoad";
import { writeDump } from "./backups/dump";
import { applyDump } from "./backups/restore";
import { JobRefused } from "./refused";

/**
 * Major-version upgrade of a project on Strata's embedded cluster: its database moves to an embedded
 * cluster of the newer major (made and run by Strata, see projects/embeddedClusters.ts) by Strata's own
 * logical dump and restore (plain SQL and COPY, which the newer server reads), its roles are made there with
 * the same password verifiers, memberships and per-database settings, then the project's row points at the
 * new cluster (every node rebuilds its pools) and the old database is dropped. During the move the old
 * database accepts no connections (nothing written is lost); a failure opens it again and drops what was
 * made on the new cluster, so the project stays where it was, usable, and the upgrade is marked failed.
 */

/** Platform values of `databaseUpgradeStatus.status`. */
const UPGRADING = 0;
const UPGRADED = 1;
const FAILED = 2;

/** The project an upgrade moves: its database and the cluster it is on now. */
export interface UpgradingProject {
  ref: string;
  database_name: string;
  cluster: Cluster;
}

declare module "../context" {
  interface AppContext {
    /** Major-version upgrades run by this process (absent in CLI commands that serve nothing). */
    upgrades?: Upgrades;
  }
}

/**
 * The upgrades this process runs: the embedded clusters, and so upgrades, belong to one node. Started by
 * app.ts, and awaited before the clusters stop; the Management API's upgrade routes begin them through the
 * context once they checked the project can go.
 */
export class Upgrades {
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly ctx: AppContext) {}

  /**
   * An upgrade still marked running was cut short by a stop of the process that ran it. The project stays on
   * its old cluster, open again, and the upgrade is marked failed; what it made on the new cluster goes at
   * the next attempt.
   */
  async start(): Promise<void> {
    const { rows } = await this.ctx.platformPool.query(
      `update platform.project_upgrades set status = $1, error = '8_upgrade_completion_failed',
              error_detail = 'Strata stopped during the upgrade', latest_status_at = now()
        where status = $2
       returning project_ref, source_cluster_id`,
      [FAILED, UPGRADING],
    );
    for (const row of rows) {
      // A project the upgrade already moved is where it belongs.
      const { rows: left } = await this.ctx.platformPool.query(
        `select p.database_name, c.id as cluster_id, c.region, c.admin_url, c.authenticator_password
           from platform.projects p join platform.clusters c on c.id = p.cluster_id
          where p.ref = $1 and p.cluster_id = $2`,
        [row.project_ref, row.source_cluster_id],
      );
      if (!left[0]) continue;
      await reopen(clusterOfRow(left[0], kekOf(this.ctx.platformPool)), left[0].database_name);
      await this.ctx.platformPool.query(
        "update platform.projects set status = 'ACTIVE_HEALTHY' where ref = $1 and status = 'UPGRADING'",
        [row.project_ref],
      );
    }
  }

  /** Records the upgrade of `project` to `target` and runs it in the background; answers its tracking id. */
  async begin(project: UpgradingProject, target: PostgresBinaries): Promise<string> {
    const { rows } = await this.ctx.platformPool
      .query(
        `insert into platform.project_upgrades (project_ref, source_cluster_id, target_version) values ($1, $2, $3)
         returning id`,
        [project.ref, project.cluster.id, target.major],
      )
      .catch((e) => {
        if ((e as { code?: string }).code === "23505")
          throw new JobRefused(409, `An upgrade of project ${project.ref} is already running`);
        throw e;
      });
    const id: string = rows[0].id;
    const done = runUpgrade(this.ctx, id, project, target).catch((e) =>
      this.ctx.log.error({ ref: project.ref, err: (e as Error).message }, "upgrade bookkeeping failed"),
    );
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
    return id;
  }

  /** Waits for the upgrades running now. */
  async stop(): Promise<void> {
    await Promise.all([...this.running]);
  }
}

async function step(ctx: AppContext, id: string, progress: string): Promise<void> {
  await ctx.platformPool.query(
    "update platform.project_upgrades set progress = $2, latest_status_at = now() where id = $1",
    [id, progress],
  );
}

async function connect(url: string, name: string): Promise<pg.Client> {
  const client = oneOffClient({
    connectionString: url,
    options: CATALOG_ONLY_SESSION,
    application_name: name,
  });
  await client.connect();
  return client;
}

async function runUpgrade(
  ctx: AppContext,
  id: string,
  project: UpgradingProject,
  target: PostgresBinaries,
): Promise<void> {
  const { ref, database_name: database } = project;
  const source = project.cluster;
  let failure = "1_upgraded_instance_launch_failed";
  let targetCluster: Cluster | undefined;
  let closed = false;
  let oldDb: pg.Client | undefined;
  const pipe = new PassThrough();
  try {
    const moving = await ctx.platformPool.query(
      "update platform.projects set status = 'UPGRADING', updated_at = now() where ref = $1 and status = 'ACTIVE_HEALTHY'",
      [ref],
    );
    if (moving.rowCount !== 1) throw new Error(`project ${ref} is no longer active`);
    await ctx.registry.evict(ref);
    await step(ctx, id, "1_started");

    targetCluster = await ctx.embeddedClusters!.ensure(target);
    await ctx.platformPool.query(
      "update platform.project_upgrades set target_cluster_id = $2, latest_status_at = now() where id = $1",
      [id, targetCluster.id],
    );
    // What a failed earlier attempt left there goes first.
    await dropProjectDatabase(targetCluster, database);
    await createProjectDatabase(targetCluster, database);
    const { rows } = await ctx.platformPool.query(
      "select sql_role_password, read_role_password from platform.projects where ref = $1",
      [ref],
    );
    const kek = kekOf(ctx.platformPool);
    const newUrl = withDatabase(targetCluster.adminUrl, database);
    const sqlPassword = kek.open(rows[0].sql_role_password, "platform.projects.sql_role_password");
    await prepareProjectDatabase(newUrl, {
      ref,
      sqlPassword,
      readPassword: kek.open(rows[0].read_role_password, "platform.projects.read_role_password"),
      authenticatorPassword: targetCluster.authenticatorPassword,
    });
    await step(ctx, id, "2_launched_upgraded_instance");

    failure = "4_data_upgrade_initiation_failed";
    // Strata's session is open before the database closes to everyone else (superusers included).
    oldDb = await connect(withDatabase(source.adminUrl, database), `strata-upgrade-${id}`);
    closed = true;
    await closeToOthers(source, database, oldDb);
    const newDb = await connect(newUrl, `strata-upgrade-${id}`);
    try {
      await copyRoles(oldDb, newDb, ref, database);
      await step(ctx, id, "5_initiated_data_upgrade");
      failure = "5_data_upgrade_completion_failed";
      const dumped = writeDump(oldDb, pipe, () => {}).then(
        () => pipe.end(),
        (e: Error) => {
          pipe.destroy(e);
          throw e;
        },
      );
      dumped.catch(() => {});
      // Applied as the project's owner on the new cluster, as a restore is (see backups/restore.ts).
      const owner = {
        sqlUrl: withCredentials(newUrl, `strata_sql_${ref}`, sqlPassword),
        ownerRole: `postgres_${ref}`,
      };
      const skipped = await withOwnerLoad(owner, newDb, `strata-upgrade-${id}`, (client, strata) =>
        applyDump(client, strata, pipe, () => {}),
      );
      await dumped;
      if (skipped.length) {
        ctx.log.warn(
          { ref, statements: skipped.map((s) => s.slice(0, 200)) },
          "upgrade: statements only a superuser may run were left out",
        );
      }
    } finally {
      await newDb.end().catch(() => {});
    }
    await step(ctx, id, "6_completed_data_upgrade");

    failure = "8_upgrade_completion_failed";
    await ctx.platformPool.query(
      `update platform.projects set cluster_id = $2, status = 'ACTIVE_HEALTHY', updated_at = now() where ref = $1`,
      [ref, targetCluster.id],
    );
  } catch (e) {
    const message = (e as Error).message;
    ctx.log.warn({ ref, err: message }, "upgrade failed; the project stays on its cluster");
    if (targetCluster) {
      await dropProjectDatabase(targetCluster, database).catch(() => {});
      await dropProjectRoles(targetCluster, ref).catch(() => {});
    }
    // A dump still writing stops; its session ends, and the database opens again (from another session).
    pipe.destroy();
    await oldDb?.end().catch(() => {});
    if (closed) await reopen(source, database).catch(() => {});
    await ctx.platformPool.query(
      "update platform.projects set status = 'ACTIVE_HEALTHY', updated_at = now() where ref = $1 and status = 'UPGRADING'",
      [ref],
    );
    await ctx.platformPool.query(
      `update platform.project_upgrades set status = $2, error = $3, error_detail = $4, latest_status_at = now()
        where id = $1`,
      [id, FAILED, failure, message],
    );
    return;
  }
  // The project now lives on the new cluster; the old database (and the project's roles there) go.
  await oldDb.end().catch(() => {});
  await ctx.registry.evict(ref);
  // The old cluster's pg_hba.conf block loses the project's lines; the new one's gains them.
  await ctx
    .accessOf?.(project.cluster.id)
    ?.apply()
    .catch(() => {});
  await ctx
    .accessOf?.(targetCluster!.id)
    ?.apply()
    .catch(() => {});
  try {
    await dropOldDatabase(source, database);
    await dropProjectRoles(source, ref);
  } catch (e) {
    ctx.log.warn({ ref, err: (e as Error).message }, "the upgraded project's old database was not dropped");
  }
  await ctx.platformPool.query(
    `update platform.project_upgrades set status = $2, progress = '9_completed_upgrade', latest_status_at = now()
      where id = $1`,
    [id, UPGRADED],
  );
  ctx.log.info({ ref, cluster: targetCluster!.id }, "project upgraded");
}

/** No new session may open the database (superusers neither) and the open ones, but `keep`'s, end. */
async function closeToOthers(cluster: Cluster, database: string, keep: pg.Client): Promise<void> {
  const pid: number = (await keep.query("select pg_backend_pid() as pid")).rows[0].pid;
  // A database cannot be closed from a session of its own: from the maintenance database.
  const client = await connect(cluster.adminUrl, "strata-upgrade-close");
  try {
    await runUtilityStatement(client, "alter database %I with allow_connections false", [database]);
    await client.query(
      "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> $2",
      [database, pid],
    );
  } finally {
    await client.end().catch(() => {});
  }
}

async function reopen(cluster: Cluster, database: string): Promise<void> {
  const client = await connect(cluster.adminUrl, "strata-upgrade-cleanup");
  try {
    await runUtilityStatement(client, "alter database %I with allow_connections true", [database]);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Realtime's replication slots on the database would refuse its drop: they go with it. */
async function dropOldDatabase(cluster: Cluster, database: string): Promise<void> {
  const client = await connect(cluster.adminUrl, "strata-upgrade-cleanup");
  try {
    await client.query(
      "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = $1 and not active",
      [database],
    );
  } finally {
    await client.end().catch(() => {});
  }
  await dropProjectDatabase(cluster, database);
}

/** A list setting's stored text: names, plain or double-quoted, separated by commas. */
const LIST_VALUE =
  /^\s*("([^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*)(\s*,\s*("([^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*))*\s*$/;

/** GUCs whose value is a list: their stored text is already in SET's syntax, never one quoted literal. */
const LIST_SETTINGS = new Set([
  "search_path",
  "temp_tablespaces",
  "local_preload_libraries",
  "session_preload_libraries",
]);

/**
 * The project's roles on the new cluster as on the old one: owner, SQL and read-only logins with their
 * password verifiers (db_pass is kept nowhere but there), temporary and just-in-time logins with their
 * expiry, memberships and CONNECT; then the database's own settings and its per-role ones (read-only mode,
 * PostgreSQL config set per database).
 */
async function copyRoles(from: pg.Client, to: pg.Client, ref: string, database: string): Promise<void> {
  const { rows: roles } = await from.query(
    `select rolname, rolpassword, rolcanlogin, rolvaliduntil::text as valid_until, rolconnlimit
       from pg_authid
      where rolname = any($1) or starts_with(rolname, $2) or starts_with(rolname, $3)
      order by rolname`,
    [[`postgres_${ref}`, `strata_sql_${ref}`, `strata_read_${ref}`], `cli_login_${ref}_`, `jit_${ref}_`],
  );
  const names = roles.map((r) => r.rolname as string);
  const temporary = (name: string) => name.startsWith(`cli_login_${ref}_`) || name.startsWith(`jit_${ref}_`);
  for (const role of roles) {
    const exists = await to.query("select 1 from pg_roles where rolname = $1", [role.rolname]);
    if (!exists.rowCount) await runUtilityStatement(to, "create role %I", [role.rolname]);
    await runUtilityStatement(
      to,
      `alter role %I with ${role.rolcanlogin ? "login" : "nologin"} connection limit %s valid until %L`,
      [role.rolname, String(role.rolconnlimit), role.valid_until ?? "infinity"],
    );
    if (role.rolpassword)
      await runUtilityStatement(to, "alter role %I with password %L", [role.rolname, role.rolpassword]);
    else await runUtilityStatement(to, "alter role %I with password null", [role.rolname]);
    if (temporary(role.rolname))
      await runUtilityStatement(to, "grant connect on database %I to %I", [database, role.rolname]);
  }
  const { rows: memberships } = await from.query(
    `select r.rolname as role, m.rolname as member
       from pg_auth_members am join pg_roles r on r.oid = am.roleid join pg_roles m on m.oid = am.member
      where m.rolname = any($1)`,
    [names],
  );
  for (const { role, member } of memberships) {
    const exists = await to.query("select 1 from pg_roles where rolname = $1", [role]);
    if (exists.rowCount) await runUtilityStatement(to, "grant %I to %I", [role, member]);
  }
  const { rows: settings } = await from.query(
    `select r.rolname, s.setconfig
       from pg_db_role_setting s join pg_database d on d.oid = s.setdatabase
       left join pg_roles r on r.oid = s.setrole
      where d.datname = current_database()`,
  );
  for (const { rolname, setconfig } of settings) {
    // The database's own settings and its own roles' only: a role every project shares (anon, authenticator)
    // may have been given settings here by any tenant.
    if (rolname && !names.includes(rolname)) continue;
    for (const entry of setconfig as string[]) {
      const at = entry.indexOf("=");
      const name = entry.slice(0, at);
      const value = entry.slice(at + 1);
      // A list's stored text goes into the statement as it is: only a list of plain or quoted names may.
      if (LIST_SETTINGS.has(name) && !LIST_VALUE.test(value)) continue;
      const valueSql = LIST_SETTINGS.has(name) ? value : "%L";
      const args = LIST_SETTINGS.has(name) ? [] : [value];
      if (rolname)
        await runUtilityStatement(to, `alter role %I in database %I set %I = ${valueSql}`, [
          rolname,
          database,
          name,
          ...args,
        ]);
      else await runUtilityStatement(to, `alter database %I set %I = ${valueSql}`, [database, name, ...args]);
    }
  }
}
