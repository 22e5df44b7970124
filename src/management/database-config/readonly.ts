import { statfs } from "node:fs/promises";
import { existsSync } from "node:fs";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { touchProject } from "../projects/store";
import { withOneOffClient } from "../../db/client";
import { runUtilityStatement } from "../../db/utility";
import { projectAuthenticator } from "../../projects/clusters";
import { readSettings, writeSettings } from "../../projects/settings";
import { autoscaleDisk, grownSize } from "./autoscale";

/**
 * Read-only mode of a project's database, as on the platform: turned on by the operator (PUT .../readonly)
 * or by the system when the database uses more than THRESHOLD of its disk (unless disk autoscaling, where
 * the project turned it on, grew the disk first: autoscale.ts), lifted for 15 minutes by
 * `readonly/temporary-disable`, after which it comes back if its cause is still there. The disk watch
 * (jobs/diskWatch.ts) settles it on an interval for the projects open on each node.
 *
 * It is `default_transaction_read_only = on` for the project's own roles in its database (`ALTER ROLE ...
 * IN DATABASE ... SET`): data requests, the auth service, the owner's and the SQL endpoint's logins. Strata's
 * own superuser sessions stay writable (in the default project the control plane lives in the same database). Open
 * sessions of those roles are ended so that pools reconnect with the new default.
 */

/** Share of the disk after which the system turns read-only mode on (the platform's 95 %). */
export const THRESHOLD = 0.95;
/** How long temporary-disable lifts read-only mode (spec: 15 minutes). */
export const OVERRIDE_MS = 15 * 60_000;

export const READONLY_DEFAULTS = { manual: false, override_active_until: "" };
export const DISK_DEFAULTS = {
  attributes: { iops: 3000, size_gb: 8, type: "gp3", throughput_mibps: 125 },
  last_modified_at: "",
};

/** The roles whose sessions read-only mode applies to. */
async function projectRoles(project: ProjectRuntime): Promise<string[]> {
  const { rows } = await project.adminPool.query(
    `select rolname from pg_roles where rolname = any($1) or starts_with(rolname, $2)`,
    [
      [
        projectAuthenticator(project.ref),
        `postgres_${project.ref}`,
        `strata_sql_${project.ref}`,
        `strata_auth_${project.ref}`,
      ],
      `cli_login_${project.ref}_`,
    ],
  );
  return rows.map((r) => r.rolname);
}

/** Whether read-only mode is applied now (the data requests' role starts read-only in the database). */
export async function readOnlyApplied(project: ProjectRuntime): Promise<boolean> {
  const { rows } = await project.adminPool.query(
    `select exists (select from pg_db_role_setting s join pg_database d on d.oid = s.setdatabase
                     join pg_roles r on r.oid = s.setrole
                    where d.datname = current_database() and r.rolname = $1
                      and 'default_transaction_read_only=on' = any(s.setconfig)) as on`,
    [projectAuthenticator(project.ref)],
  );
  return rows[0].on;
}

/**
 * Sets or resets the roles' read-only default, then ends their sessions so that connections start anew with
 * it. `renewPools` runs in between: pools opened after it get the new default, and no request of this node is
 * handed a pooled connection that is about to be ended.
 */
async function applyReadOnly(
  project: ProjectRuntime,
  on: boolean,
  renewPools: () => Promise<void>,
): Promise<void> {
  const client = await project.adminPool.connect();
  try {
    const db: string = (await client.query("select current_database() as d")).rows[0].d;
    for (const role of await projectRoles(project)) {
      if (on) {
        await runUtilityStatement(
          client,
          "alter role %I in database %I set default_transaction_read_only = on",
          [role, db],
        );
      } else {
        await runUtilityStatement(
          client,
          "alter role %I in database %I reset default_transaction_read_only",
          [role, db],
        );
      }
    }
    await renewPools();
    await client.query(
      `select pg_terminate_backend(a.pid) from pg_stat_activity a join pg_roles r on r.rolname = a.usename
        where a.datname = current_database() and a.pid <> pg_backend_pid() and not r.rolsuper
          and a.backend_type = 'client backend'`,
    );
  } finally {
    client.release();
  }
}

export interface DiskUsage {
  /**
   * The project's disk: its configured size, or the installation's quota when smaller, or the volume's;
   * or the size disk autoscaling grew it to, when larger (within the volume).
   */
  sizeBytes: number;
  usedBytes: number;
  availBytes: number;
  volumeBytes: number;
}

/** The project's database size and the disk it may use, measured now. */
export async function diskUsage(ctx: AppContext, project: ProjectRuntime): Promise<DiskUsage> {
  const { rows } = await project.adminPool.query(
    "select pg_database_size(current_database())::bigint as used, current_setting('data_directory') as dir",
  );
  const used = Number(rows[0].used);
  // The volume the cluster writes to, when it is on this machine (else the one of Strata's data directory).
  const dir = existsSync(rows[0].dir) ? rows[0].dir : ctx.config.dataDir;
  const fs = await statfs(dir);
  const volumeSize = fs.blocks * fs.bsize;
  const volumeAvail = fs.bavail * fs.bsize;
  const disk = await readSettings(ctx, project.ref, "disk", DISK_DEFAULTS);
  let size = Math.min(disk.attributes.size_gb * 1024 ** 3, volumeSize);
  if (ctx.config.projectDiskQuotaBytes) size = Math.min(size, ctx.config.projectDiskQuotaBytes);
  size = Math.min(Math.max(size, await grownSize(ctx, project.ref)), volumeSize);
  return {
    sizeBytes: size,
    usedBytes: used,
    availBytes: Math.max(0, Math.min(size - used, volumeAvail)),
    volumeBytes: volumeSize,
  };
}

export interface ReadOnlyState {
  enabled: boolean;
  override_enabled: boolean;
  override_active_until: string;
}

/** What the project's read-only mode should be now, and the state to answer. */
async function decideReadOnly(
  ctx: AppContext,
  project: ProjectRuntime,
): Promise<{ wanted: boolean; usedBytes: number; state: ReadOnlyState }> {
  const state = await readSettings(ctx, project.ref, "readonly", READONLY_DEFAULTS);
  const overrideActive =
    state.override_active_until !== "" && new Date(state.override_active_until) > new Date();
  let usage = await diskUsage(ctx, project);
  // Autoscaling, where the project turned it on, grows the disk before it fills.
  if (await autoscaleDisk(ctx, project.ref, usage)) usage = await diskUsage(ctx, project);
  const full = usage.usedBytes >= usage.sizeBytes * THRESHOLD;
  const wanted = (state.manual || full) && !overrideActive;
  // The cluster's volume nearly full refuses every project's writes (ClusterDiskGuard), whatever the override.
  const clusterFull = ctx.clusterDisk?.refuses(project.record.clusterId) ?? false;
  return {
    wanted,
    usedBytes: usage.usedBytes,
    state: {
      enabled: wanted || clusterFull,
      override_enabled: overrideActive,
      override_active_until: state.override_active_until,
    },
  };
}

/** Advisory lock class of read-only changes on the control plane (the project's id is the second key). */
const READ_ONLY_LOCK = 7_305_200;

/** Runs `work` holding the project's read-only lock, on a connection of its own (ending it frees the lock). */
async function withReadOnlyLock<T>(ctx: AppContext, project: ProjectRuntime, work: () => Promise<T>) {
  return withOneOffClient({ connectionString: ctx.controlUrl }, async (client) => {
    await client.query("select pg_advisory_lock($1, $2)", [READ_ONLY_LOCK, project.record.id]);
    return work();
  });
}

/**
 * Decides and applies the project's read-only mode: on when the operator asked or the disk is past the
 * threshold, unless a temporary disable is still running. Answers the state. A change is decided again and
 * applied under the project's lock: two settles at once (the endpoint and the disk monitor, or two nodes)
 * would otherwise alter the same role settings together (Postgres refuses one: "tuple concurrently
 * deleted") or apply a decision made before the other's change.
 */
export async function settleReadOnly(ctx: AppContext, project: ProjectRuntime): Promise<ReadOnlyState> {
  const first = await decideReadOnly(ctx, project);
  if (first.wanted === (await readOnlyApplied(project))) return first.state;
  return withReadOnlyLock(ctx, project, async () => {
    const { wanted, usedBytes, state } = await decideReadOnly(ctx, project);
    if (wanted === (await readOnlyApplied(project))) return state;
    await applyReadOnly(project, wanted, async () => {
      // This node's runtime is replaced at once; the row's change notice tells the other nodes.
      await ctx.registry.retire(project.ref);
      await touchProject(ctx.platformPool, project.ref);
    });
    ctx.log.info({ ref: project.ref, readOnly: wanted, usedBytes }, "read-only mode changed");
    return state;
  });
}

export async function setManualReadOnly(ctx: AppContext, project: ProjectRuntime, on: boolean) {
  // Turning it on ends a temporary disable; turning it off leaves the disk check in charge.
  await writeSettings(ctx, project.ref, "readonly", READONLY_DEFAULTS, {
    manual: on,
    ...(on ? { override_active_until: "" } : {}),
  });
  return settleReadOnly(ctx, project);
}

export async function temporarilyDisable(ctx: AppContext, project: ProjectRuntime) {
  await writeSettings(ctx, project.ref, "readonly", READONLY_DEFAULTS, {
    override_active_until: new Date(Date.now() + OVERRIDE_MS).toISOString(),
  });
  return settleReadOnly(ctx, project);
}
