import type pg from "pg";
import { z } from "zod";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { runUtilityStatement } from "../../db/utility";
import { HttpError } from "../http";

/**
 * The SQL engine config of the spec: every field is a PostgreSQL setting, validated against the server's own
 * limits (pg_settings: min_val, max_val, enumvals) and applied where PostgreSQL allows it: per database
 * (`ALTER DATABASE ... SET`) for settings a session may change, cluster-wide (`ALTER SYSTEM` and a reload)
 * for reload-time ones, and with a restart of the embedded cluster for start-time ones when
 * `restart_database` is true. Cluster-wide settings and restarts are for the installation's administrators only
 * (every project of the cluster shares them); per-database ones are the project's. GET answers the effective
 * values a new session of the database sees.
 */
const STRING_FIELDS = [
  "effective_cache_size",
  "logical_decoding_work_mem",
  "log_autovacuum_min_duration",
  "log_startup_progress_interval",
  "log_temp_files",
  "maintenance_work_mem",
  "track_activity_query_size",
  "max_slot_wal_keep_size",
  "max_standby_archive_delay",
  "max_standby_streaming_delay",
  "max_wal_size",
  "shared_buffers",
  "statement_timeout",
  "wal_keep_size",
  "wal_sender_timeout",
  "work_mem",
  "checkpoint_timeout",
  // Not in the spec's list; kept from Strata's earlier config, applied the same way.
  "idle_in_transaction_session_timeout",
  "lock_timeout",
] as const;
const BOOLEAN_FIELDS = [
  "cron.log_statement",
  "log_checkpoints",
  "log_connections",
  "log_disconnections",
  "log_duration",
  "log_lock_waits",
  "log_recovery_conflict_waits",
  "log_replication_commands",
  "track_commit_timestamp",
  "hot_standby_feedback",
] as const;
const INTEGER_FIELDS = [
  "max_connections",
  "max_locks_per_transaction",
  "max_parallel_maintenance_workers",
  "max_parallel_workers",
  "max_parallel_workers_per_gather",
  "max_replication_slots",
  "max_wal_senders",
  "max_worker_processes",
] as const;
const FIELDS = [
  ...STRING_FIELDS,
  ...BOOLEAN_FIELDS,
  ...INTEGER_FIELDS,
  "session_replication_role",
  "random_page_cost",
];

export const PostgresConfigBody = z
  .object({
    ...Object.fromEntries(STRING_FIELDS.map((f) => [f, z.string().optional()])),
    ...Object.fromEntries(BOOLEAN_FIELDS.map((f) => [f, z.boolean().optional()])),
    ...Object.fromEntries(INTEGER_FIELDS.map((f) => [f, z.number().int().optional()])),
    session_replication_role: z.string().optional(),
    random_page_cost: z.number().positive().optional(),
    restart_database: z.boolean().optional(),
  })
  .strict();
export const PostgresConfigAnswer = z.object(
  Object.fromEntries(
    FIELDS.map((f) => [
      f,
      (BOOLEAN_FIELDS as readonly string[]).includes(f)
        ? z.boolean().optional()
        : (INTEGER_FIELDS as readonly string[]).includes(f) || f === "random_page_cost"
          ? z.number().optional()
          : z.string().optional(),
    ]),
  ),
);

interface Setting {
  name: string;
  vartype: string;
  unit: string | null;
  min_val: string | null;
  max_val: string | null;
  enumvals: string[] | null;
  context: string;
  source: string;
}

const MEMORY: Record<string, number> = { B: 1, kB: 1024, MB: 1024 ** 2, GB: 1024 ** 3, TB: 1024 ** 4 };
const TIME: Record<string, number> = { us: 0.001, ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 };

/** A value with an optional unit in the setting's base unit (e.g. '8kB' pages, 'ms'), as PostgreSQL reads it. */
function inBaseUnit(setting: Setting, value: string): number {
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
  if (!m) throw new HttpError(400, `${setting.name}: "${value}" is not a number with an optional unit`);
  const [, number, unit] = m;
  if (!unit || !setting.unit) {
    if (unit) throw new HttpError(400, `${setting.name} takes no unit`);
    return Number(number);
  }
  const base = /^(\d*)(\w+)$/.exec(setting.unit)!;
  const baseFactor = Number(base[1] || 1);
  const table = base[2] in MEMORY ? MEMORY : TIME;
  if (!(unit in table)) {
    throw new HttpError(
      400,
      `${setting.name}: unit "${unit}" is not valid; use one of ${Object.keys(table).join(", ")}`,
    );
  }
  return (Number(number) * table[unit]) / (table[base[2]] * baseFactor);
}

/** Checks a value against the server's limits and answers it as the text PostgreSQL is given. */
function validated(setting: Setting, value: unknown): string {
  if (setting.vartype === "bool") return value ? "on" : "off";
  if (setting.vartype === "enum") {
    const text = String(value);
    if (!setting.enumvals!.includes(text)) {
      throw new HttpError(400, `${setting.name} must be one of ${setting.enumvals!.join(", ")}`);
    }
    return text;
  }
  const text = String(value);
  const n = setting.vartype === "string" ? NaN : inBaseUnit(setting, text);
  const min = Number(setting.min_val);
  const max = Number(setting.max_val);
  if (Number.isFinite(n) && (n < min || n > max)) {
    const unit = setting.unit ? ` (unit ${setting.unit})` : "";
    throw new HttpError(
      400,
      `${setting.name} must be between ${setting.min_val} and ${setting.max_val}${unit}`,
    );
  }
  return text;
}

/**
 * pg_cron's settings that Strata's cron (src/jobs/modules/cron.ts) honours where pg_cron is not loaded: kept per
 * database (`ALTER DATABASE ... SET`, as a placeholder the job's session reads). Where pg_cron is loaded they are
 * the server's own, in pg_settings.
 */
const CRON_MODULE_SETTINGS: Record<string, { setting: Setting; default: string }> = {
  "cron.log_statement": {
    setting: {
      name: "cron.log_statement",
      vartype: "bool",
      unit: null,
      min_val: null,
      max_val: null,
      enumvals: null,
      context: "user",
      source: "default",
    },
    default: "on",
  },
};

async function settingsOf(client: pg.ClientBase, names: string[]): Promise<Map<string, Setting>> {
  const { rows } = await client.query(
    `select name, vartype, unit, min_val, max_val, enumvals, context, source from pg_settings where name = any($1)`,
    [names],
  );
  const settings = new Map<string, Setting>(rows.map((r) => [r.name, r]));
  for (const name of names) {
    if (!settings.has(name) && CRON_MODULE_SETTINGS[name])
      settings.set(name, CRON_MODULE_SETTINGS[name].setting);
  }
  return settings;
}

/** The effective values a new session of the project's database starts with. */
export async function effectiveConfig(project: ProjectRuntime): Promise<Record<string, unknown>> {
  const client = await project.adminPool.connect();
  try {
    const db: string = (await client.query("select current_database() as d")).rows[0].d;
    // The database's own settings (ALTER DATABASE) win over the server's for a new session.
    const { rows: own } = await client.query(
      `select unnest(s.setconfig) as setting from pg_db_role_setting s join pg_database d on d.oid = s.setdatabase
        where d.datname = $1 and s.setrole = 0`,
      [db],
    );
    const perDatabase = new Map<string, string>();
    for (const r of own) {
      const at = String(r.setting).indexOf("=");
      perDatabase.set(r.setting.slice(0, at), r.setting.slice(at + 1));
    }
    // One round trip: current_setting() answers each value as SHOW does, with its unit.
    const { rows } = await client.query(
      "select name, vartype, unit, current_setting(name) as value from pg_settings where name = any($1)",
      [FIELDS],
    );
    const out: Record<string, unknown> = {};
    for (const [name, { default: value }] of Object.entries(CRON_MODULE_SETTINGS)) {
      if (!rows.some((r) => r.name === name)) rows.push({ name, vartype: "bool", unit: null, value });
    }
    for (const r of rows) {
      const value: string = perDatabase.get(r.name) ?? r.value;
      if (r.vartype === "bool") out[r.name] = value === "on" || value === "true";
      else if (r.vartype === "integer" && !r.unit) out[r.name] = Number(value);
      else if (r.vartype === "real") out[r.name] = Number(value);
      else out[r.name] = value;
    }
    return out;
  } finally {
    client.release();
  }
}

/**
 * Whether `sent` is the value a new session already has: the same JSON value, or for a setting with a unit the
 * same amount written differently ("4MB" and "4096kB").
 */
function unchanged(setting: Setting | undefined, sent: unknown, current: unknown): boolean {
  if (!setting || current === undefined) return false;
  if (sent === current) return true;
  if (!setting.unit || (typeof sent !== "string" && typeof sent !== "number")) return false;
  try {
    return inBaseUnit(setting, String(sent)) === inBaseUnit(setting, String(current));
  } catch {
    return false;
  }
}

/** Whether the project's database lives on the cluster Strata runs itself (it may restart that one). */
function onEmbeddedCluster(ctx: AppContext, project: ProjectRuntime): boolean {
  if (!ctx.restartCluster) return false;
  const a = new URL(ctx.adminUrl);
  const b = new URL(project.record.adminUrl);
  return a.hostname === b.hostname && (a.port || "5432") === (b.port || "5432");
}

/** Where a setting is applied: the project's database, or the whole cluster (with a reload or a restart). */
type Reach = "database" | "reload" | "restart";

/** Where PostgreSQL lets a setting of this context be set; 400 for one no session or file may change. */
function reachOf(setting: Setting): Reach {
  if (setting.context === "user" || setting.context === "superuser") return "database";
  if (setting.context === "sighup") return "reload";
  if (setting.context === "postmaster") return "restart";
  throw new HttpError(400, `${setting.name} cannot be changed (PostgreSQL context ${setting.context})`);
}

/**
 * Cluster-wide settings and restarts are the installation's (every project on the cluster shares them): 403
 * naming them for a caller who is not an installation administrator.
 */
function refuseClusterWide(fields: { name: string; reach: Reach }[], restart: boolean): void {
  const named = fields
    .filter((f) => f.reach !== "database")
    .map((f) => `${f.name} (${f.reach === "reload" ? "ALTER SYSTEM" : "a restart"})`);
  if (restart) named.push("restart_database (a restart of the cluster)");
  if (!named.length) return;
  throw new HttpError(
    403,
    `Forbidden: ${named.join(", ")}: ${named.length > 1 ? "these act" : "this acts"} on the whole PostgreSQL ` +
      "cluster, which this project shares with the installation's other projects; only the installation's " +
      "administrators may do that. Settings a session may change (statement_timeout, work_mem, ...) are " +
      "applied to this project's database and stay yours",
  );
}

/** One step of a PUT: a value to set, or `null` to drop the override (the setting goes back to its default). */
interface Change {
  name: string;
  value: string | null;
  reach: Reach;
}

/**
 * The overrides a PUT that leaves these fields out drops: the database's own (`ALTER DATABASE ... SET`), and for
 * an installation administrator the cluster's (`ALTER SYSTEM`, in postgresql.auto.conf). A tenant's overrides
 * are its database's: the cluster's settings are the installation's, which a tenant's PUT neither sets nor drops.
 */
async function overridesLeftOut(
  client: pg.ClientBase,
  db: string,
  present: Set<string>,
  clusterWide: boolean,
): Promise<{ database: string[]; cluster: string[] }> {
  const { rows: own } = await client.query<{ name: string }>(
    `select split_part(c, '=', 1) as name
       from pg_db_role_setting s join pg_database d on d.oid = s.setdatabase, unnest(s.setconfig) c
      where d.datname = $1 and s.setrole = 0`,
    [db],
  );
  const leftOut = (names: string[]) => names.filter((n) => FIELDS.includes(n) && !present.has(n));
  const database = leftOut(own.map((r) => r.name));
  if (!clusterWide) return { database, cluster: [] };
  const { rows: system } = await client.query<{ name: string }>(
    "select distinct name from pg_file_settings where sourcefile like '%/postgresql.auto.conf'",
  );
  return { database, cluster: leftOut(system.map((r) => r.name)) };
}

/**
 * Replaces the project's overrides with the body, as the platform does (its CLI merges client-side, and
 * `postgres-config delete` sends the config it read without the deleted keys): a field sent sets its value, a
 * field left out loses its override. Validates every change first (nothing is applied when one is refused),
 * then applies them: per database, cluster-wide with a reload, or cluster-wide with a restart. Only an
 * installation administrator (`clusterWide`) may change cluster-wide settings or restart.
 */
export async function applyConfig(
  ctx: AppContext,
  project: ProjectRuntime,
  body: Record<string, unknown>,
  clusterWide: boolean,
): Promise<void> {
  const { restart_database: restart, ...fields } = body;
  const sent = Object.entries(fields).filter(([, v]) => v !== undefined);
  // Clients send back the whole config they read with their change in it (the platform's CLI does): a field
  // sent with its current value changes nothing, so neither its reach nor its caller's rights are in question.
  const current = sent.length ? await effectiveConfig(project) : {};
  const client = await project.adminPool.connect();
  try {
    const db: string = (await client.query("select current_database() as d")).rows[0].d;
    const dropped = await overridesLeftOut(client, db, new Set(sent.map(([k]) => k)), clusterWide);
    const settings = await settingsOf(client, [...sent.map(([k]) => k), ...dropped.cluster]);
    const entries = sent.filter(([name, raw]) => !unchanged(settings.get(name), raw, current[name]));
    const reached = entries.map(([name, raw]) => {
      const setting = settings.get(name);
      if (!setting) {
        throw new HttpError(400, `${name} is not a setting of this PostgreSQL server`);
      }
      return { name, raw, setting, reach: reachOf(setting) };
    });
    if (!clusterWide) refuseClusterWide(reached, restart === true);
    // What the body sends is checked first: its own refusal is the one the caller hears.
    const plan: Change[] = reached.map(({ name, raw, setting }) => ({
      name,
      value: validated(setting, raw),
      reach: startableAt(ctx, project, setting, restart),
    }));
    for (const name of dropped.database) plan.push({ name, value: null, reach: "database" });
    for (const name of dropped.cluster) {
      const setting = settings.get(name);
      // An entry the command line overrides was never in force: nothing to drop.
      if (setting && setting.source !== "command line") {
        plan.push({ name, value: null, reach: startableAt(ctx, project, setting, restart) });
      }
    }
    for (const p of plan) {
      if (p.reach === "database") {
        if (p.value === null) await runUtilityStatement(client, "alter database %I reset %I", [db, p.name]);
        else await runUtilityStatement(client, "alter database %I set %I = %L", [db, p.name, p.value]);
      } else if (p.value === null) await runUtilityStatement(client, "alter system reset %I", [p.name]);
      else await runUtilityStatement(client, "alter system set %I = %L", [p.name, p.value]);
    }
    if (plan.some((p) => p.reach === "reload")) await reloadConfiguration(client);
    if (plan.some((p) => p.reach === "restart")) {
      client.release();
      await ctx.restartCluster!();
      return;
    }
  } catch (e) {
    if (e instanceof HttpError) throw e;
    // PostgreSQL's own refusal (e.g. a value its check hook rejects) is the caller's error.
    if ((e as { code?: string }).code?.startsWith("22") || (e as { code?: string }).code === "42704") {
      throw new HttpError(400, (e as Error).message);
    }
    throw e;
  } finally {
    try {
      client.release();
    } catch {
      // released before the restart
    }
  }
}

/**
 * Where a change of this setting is applied, or 400 when it cannot be: one Strata sets on the command line, or a
 * start-time one without a restart Strata may make (`restart_database: true` on the cluster it runs).
 */
function startableAt(ctx: AppContext, project: ProjectRuntime, setting: Setting, restart: unknown): Reach {
  const { name } = setting;
  const reach = reachOf(setting);
  if (setting.source === "command line") {
    throw new HttpError(
      400,
      `${name} cannot be changed: Strata starts the cluster with it set on the command line (it needs that value)`,
    );
  }
  if (reach === "restart") {
    if (!onEmbeddedCluster(ctx, project)) {
      throw new HttpError(
        400,
        `${name} takes effect only when the server starts, and this project's cluster is not run by Strata: set it in its postgresql.conf and restart it`,
      );
    }
    if (restart !== true) {
      throw new HttpError(
        400,
        `${name} takes effect only when the server restarts: send restart_database: true to restart the database (every project on its cluster is briefly disconnected)`,
      );
    }
  }
  return reach;
}

/**
 * Reloads the cluster's configuration and answers once it is loaded: the postmaster reads the files when the
 * signal reaches it, then signals every session, this one included, so this session's own load time passing
 * the request's start says the new values are in force (a busy machine may take a moment).
 */
async function reloadConfiguration(client: pg.PoolClient): Promise<void> {
  const { rows } = await client.query<{ asked: Date }>("select clock_timestamp() as asked, pg_reload_conf()");
  for (let i = 0; i < 100; i++) {
    const loaded = await client.query<{ done: boolean }>("select pg_conf_load_time() >= $1 as done", [
      rows[0].asked,
    ]);
    if (loaded.rows[0].done) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}
