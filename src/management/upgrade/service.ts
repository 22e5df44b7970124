import type { AppContext } from "../../context";
import { availableBinaries, type PostgresBinaries } from "../../db/embeddedCluster";
import { clusterVersion } from "../../projects/clusters";
import { HttpError } from "../http";
import type { ProjectRow } from "../projects/store";

/**
 * Major-version upgrades as the Management API offers them: whether a project can go and where, the
 * request that starts one (run by the upgrade job, jobs/upgrades.ts) and its status.
 */

export interface UpgradeTarget {
  sql_version: string;
  release_channel: string;
  app_version: string;
}

const appVersion = (version: string) => `strata-postgres-${version}`;

/** Why a project cannot be upgraded, or undefined when it can (to the newer majors at hand). */
async function refusal(
  ctx: AppContext,
  project: ProjectRow,
): Promise<{ reason: string | undefined; current: string; targets: PostgresBinaries[] }> {
  const current = (await clusterVersion(project.cluster)).split(" ")[0];
  const major = Number(current.split(".")[0]);
  const targets = availableBinaries().filter((b) => b.major > major);
  let reason: string | undefined;
  if (!ctx.embeddedClusters || !embeddedCluster(ctx, project.cluster.id))
    reason =
      "Only projects on Strata's embedded PostgreSQL can be upgraded: Strata does not run this project's cluster (DATABASE_URL), so it cannot start a newer one beside it";
  else if (project.is_default)
    reason =
      "The default project is Strata's main database (it holds the installation's own data) and cannot be moved to another cluster";
  else if (project.status !== "ACTIVE_HEALTHY")
    reason = `Project ${project.ref} is ${project.status}; only an active project can be upgraded`;
  else if (!targets.length)
    reason = `No newer PostgreSQL than ${current} is installed (Strata brings PostgreSQL 18 as the optional dependency postgres-18)`;
  return { reason, current, targets };
}

/** The main embedded cluster and the ones Strata runs for upgrades; a DATABASE_URL cluster is neither. */
function embeddedCluster(ctx: AppContext, clusterId: string): boolean {
  return ctx.accessOf?.(clusterId) !== undefined || ctx.embeddedClusters?.manages(clusterId) === true;
}

export async function eligibility(ctx: AppContext, project: ProjectRow) {
  const { reason, current, targets } = await refusal(ctx, project);
  return {
    eligible: reason === undefined,
    current_app_version: appVersion(current),
    latest_app_version: appVersion(targets.at(-1)?.version ?? current),
    current_app_version_release_channel: "ga",
    target_upgrade_versions:
      reason === undefined
        ? targets.map<UpgradeTarget>((t) => ({
            sql_version: String(t.major),
            release_channel: "ga",
            app_version: appVersion(t.version),
          }))
        : [],
    duration_estimate_hours: 1,
    legacy_auth_custom_roles: [] as string[],
    objects_to_be_dropped: [] as string[],
    unsupported_extensions: [] as string[],
    user_defined_objects_in_internal_schemas: [] as string[],
    validation_errors: [] as { type: string; dependents: string[] }[],
    warnings: [] as { type: string }[],
  };
}

/** `target_version` as the platform's clients send it: a major ("18"), a version ("18.4") or an app version. */
function majorOf(targetVersion: string): number | undefined {
  const m = /^(?:strata-postgres-)?(\d+)(?:\.\d+)*$/.exec(targetVersion.trim());
  return m ? Number(m[1]) : undefined;
}

/** Starts the upgrade the caller asked for, once the project can go there; answers its tracking id. */
export async function beginUpgrade(
  ctx: AppContext,
  project: ProjectRow,
  targetVersion: string,
): Promise<string> {
  const { reason, targets } = await refusal(ctx, project);
  if (reason) throw new HttpError(400, reason);
  const major = majorOf(targetVersion);
  const target = targets.find((t) => t.major === major);
  if (!target)
    throw new HttpError(
      400,
      `target_version ${JSON.stringify(targetVersion)} is not one this project can be upgraded to (${targets.map((t) => t.major).join(", ")})`,
    );
  if (!ctx.upgrades) throw new HttpError(503, "Upgrades are not available in this process");
  return ctx.upgrades.begin(project, target);
}

export interface UpgradeStatus {
  databaseUpgradeStatus: {
    initiated_at: string;
    latest_status_at: string;
    target_version: number;
    error?: string;
    /** Strata's own: what failed, in words. */
    error_message?: string;
    progress: string;
    status: number;
  } | null;
}

/** The project's upgrade (`tracking_id`, or its latest), as the platform's status answer. */
export async function upgradeStatus(
  ctx: AppContext,
  ref: string,
  trackingId: string | undefined,
): Promise<UpgradeStatus> {
  const { rows } = await ctx.platformPool.query(
    `select * from platform.project_upgrades
      where project_ref = $1 and ($2::text is null or id::text = $2)
      order by initiated_at desc limit 1`,
    [ref, trackingId ?? null],
  );
  if (!rows[0]) {
    if (trackingId) throw new HttpError(404, `No upgrade ${trackingId} of project ${ref}`);
    return { databaseUpgradeStatus: null };
  }
  const r = rows[0];
  return {
    databaseUpgradeStatus: {
      initiated_at: new Date(r.initiated_at).toISOString(),
      latest_status_at: new Date(r.latest_status_at).toISOString(),
      target_version: r.target_version,
      ...(r.error ? { error: r.error, error_message: r.error_detail } : {}),
      progress: r.progress,
      status: r.status,
    },
  };
}
