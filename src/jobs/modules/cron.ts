import type pg from "pg";
import type { PoolClient } from "pg";
import type { AppContext } from "../../context";
import { oneOffClient } from "../../db/client";
import { withAdminTransaction } from "../../db/transaction";
import { openVaultSession } from "../../modules/vault";
import type { ProjectRuntime } from "../../projects/runtime";

/**
 * pg_cron's scheduler (sql/project/710_cron.sql). Every node looks at the projects with active jobs twice a
 * second and claims the slots now due: `cron._job_state` holds each job's last claimed slot, and a claim is an
 * update that moves it forward only when the due slot is later, so exactly one node wins each slot. A claim
 * also takes a lease on the job while its run lasts (renewed while it runs): pg_cron runs one instance of a job
 * at a time, and here a slot that comes while the job still runs is skipped; a node that stops mid-run lets
 * go when the lease ends, and its run is then recorded as failed.
 *
 * A job's command is the tenant's SQL: it runs on a connection of its own that logs in as the project's SQL
 * login (`strata_sql_<ref>`, never a superuser) and becomes the job's role (`username`, the role that
 * scheduled it) for the whole session, as pg_cron connects as that role; a role the login may not become fails
 * the run. The connection ends with the run, so nothing the command leaves in the session lasts. Before it
 * becomes the job's role, the session gets the project's vault key, so `vault.decrypted_secrets` reads in jobs
 * (the platform's recipe for invoking an edge function). The bookkeeping (claims, cron.job_run_details) runs as
 * `strata_cron` on Strata's tables.
 */

const LEASE = "60 seconds";
const LEASE_RENEW_MS = 20_000;
/** pg_cron's cron.max_running_jobs default, per node. */
const MAX_RUNNING = 32;
/** A project's share of them, so that one project's jobs cannot hold up every other's. */
const MAX_RUNNING_PER_PROJECT = 8;
/** Runs older than this, and beyond the newest RUNS_KEPT of a job, are removed from cron.job_run_details. */
const RUNS_RETENTION = "7 days";
const RUNS_KEPT = 10_000;

interface ClaimedRun {
  runid: string;
  jobid: string;
  username: string;
  command: string;
  database: string;
}

/** Runs `work` as strata_cron on the project's database, in one transaction. */
function asScheduler<T>(project: ProjectRuntime, work: (c: PoolClient) => Promise<T>): Promise<T> {
  return withAdminTransaction(project.adminPool, async (c: PoolClient) => {
    await c.query("set local role strata_cron; set local search_path = pg_catalog, pg_temp");
    return work(c);
  });
}

/**
 * Claims at most `room` due slots of the project's active jobs and records their runs as starting. Jobs the
 * trigger did not see (written before this module, or by a superuser) start their slot count first; runs of a
 * job whose lease ended are recorded as failed.
 */
export function claimDueRuns(project: ProjectRuntime, room: number): Promise<ClaimedRun[]> {
  return asScheduler(project, async (c) => {
    await c.query(
      `insert into cron._job_state (jobid, last_slot)
       select j.jobid, coalesce(cron._due_slot(j.schedule, now()), now()) from cron.job j
        where not exists (select from cron._job_state s where s.jobid = j.jobid)
       on conflict (jobid) do nothing`,
    );
    await c.query(
      `update cron.job_run_details d set status = 'failed', end_time = now(),
              return_message = 'the Strata node running the job stopped before it ended'
         from cron._job_state s
        where s.jobid = d.jobid and s.lease_until < now() and d.status in ('starting', 'running')`,
    );
    const { rows } = await c.query<ClaimedRun>(
      `with due as (
         select j.jobid, d.slot from cron.job j
           join cron._job_state s on s.jobid = j.jobid
           cross join lateral (select cron._due_slot(j.schedule, now()) as slot) d
          where j.active and d.slot > s.last_slot and (s.lease_until is null or s.lease_until < now())
          order by j.jobid limit $1
       ), claimed as (
         update cron._job_state s set last_slot = due.slot, lease_until = now() + interval '${LEASE}'
           from due
          where s.jobid = due.jobid and due.slot > s.last_slot and (s.lease_until is null or s.lease_until < now())
         returning s.jobid
       )
       insert into cron.job_run_details (jobid, database, username, command, status)
       select j.jobid, j.database, j.username, j.command, 'starting' from cron.job j join claimed using (jobid)
       returning runid::text, jobid::text, username, command, database`,
      [room],
    );
    return rows;
  });
}

function recordRun(
  project: ProjectRuntime,
  run: ClaimedRun,
  change: { status: string; message?: string; pid?: number; started?: boolean; ended?: boolean },
): Promise<unknown> {
  return asScheduler(project, (c) =>
    c.query(
      `update cron.job_run_details set status = $2, return_message = coalesce($3, return_message),
              job_pid = coalesce($4, job_pid),
              start_time = case when $5 then now() else start_time end,
              end_time = case when $6 then now() else end_time end
        where runid = $1`,
      [
        run.runid,
        change.status,
        change.message ?? null,
        change.pid ?? null,
        !!change.started,
        !!change.ended,
      ],
    ),
  );
}

function holdLease(project: ProjectRuntime, run: ClaimedRun, held: boolean): Promise<unknown> {
  return asScheduler(project, (c) =>
    c.query(
      `update cron._job_state set lease_until = case when $2 then now() + interval '${LEASE}' end where jobid = $1`,
      [run.jobid, held],
    ),
  );
}

/** What pg_cron records for a run that succeeded: the rows a SELECT returned, else the last command's tag. */
function returnMessage(tag: string | undefined): string {
  const select = /^SELECT (\d+)$/.exec(tag ?? "");
  if (select) return `${select[1]} ${select[1] === "1" ? "row" : "rows"}`;
  return tag ?? "";
}

/** Runs a job's command with the job's role on the project's SQL login; answers pg_cron's return message. */
async function runCommand(
  client: pg.Client,
  project: ProjectRuntime,
  run: ClaimedRun,
  onStarted: (pid: number) => Promise<unknown>,
): Promise<string> {
  await client.connect();
  await openVaultSession(client, project);
  // Named with their schema: the login's defaults (a role may set its own search_path) must not choose them.
  const { rows } = await client.query(
    `select pg_catalog.pg_backend_pid() as pid, pg_catalog.current_database() as database,
            pg_catalog.current_setting('cron.log_statement', true) as log_statement`,
  );
  if (rows[0].database !== run.database) {
    throw new Error(`jobs run in this project's database (${rows[0].database}), not in ${run.database}`);
  }
  await client.query("select pg_catalog.set_config('role', $1, false)", [run.username]);
  if (!["off", "false", "0"].includes(rows[0].log_statement ?? "on"))
    await client.query("select cron._log_statement($1, $2)", [run.jobid, run.command]);
  await onStarted(rows[0].pid);
  // The last command's tag, as pg reports it (`SELECT 3`, `INSERT 0 1`, `CREATE TABLE`).
  let tag: string | undefined;
  const connection = (client as unknown as { connection: NodeJS.EventEmitter }).connection;
  connection.on("commandComplete", (msg: { text: string }) => (tag = msg.text));
  await client.query(run.command);
  return returnMessage(tag);
}

export class CronRunner {
  private readonly runs = new Set<Promise<void>>();
  /** How many runs each project has on this node now. */
  private readonly running = new Map<string, number>();
  private stopping = false;
  /** The backends of the jobs running now, so that a stop can end them. */
  private readonly sessions = new Map<string, { project: ProjectRuntime; pid: number }>();

  constructor(private readonly ctx: AppContext) {}

  /** How many more runs of `ref` this node takes now. */
  roomFor(ref: string): number {
    return Math.min(MAX_RUNNING - this.runs.size, MAX_RUNNING_PER_PROJECT - (this.running.get(ref) ?? 0));
  }

  start(project: ProjectRuntime, run: ClaimedRun): void {
    const count = (delta: number) => {
      const n = (this.running.get(project.ref) ?? 0) + delta;
      if (n) this.running.set(project.ref, n);
      else this.running.delete(project.ref);
    };
    count(1);
    const done = this.run(project, run).finally(() => {
      this.runs.delete(done);
      count(-1);
    });
    this.runs.add(done);
  }

  private async run(project: ProjectRuntime, run: ClaimedRun): Promise<void> {
    const client = oneOffClient({ connectionString: project.record.sqlUrl, application_name: "pg_cron" });
    const renew = setInterval(() => void holdLease(project, run, true).catch(() => {}), LEASE_RENEW_MS);
    try {
      const message = await runCommand(client, project, run, (pid) => {
        if (this.stopping) throw new Error("Strata stopped before the job started");
        this.sessions.set(run.runid, { project, pid });
        return recordRun(project, run, { status: "running", pid, started: true });
      });
      await recordRun(project, run, { status: "succeeded", message, ended: true });
    } catch (e) {
      await recordRun(project, run, { status: "failed", message: (e as Error).message, ended: true }).catch(
        (err: Error) =>
          this.ctx.log.warn({ ref: project.ref, err: err.message }, "cron: recording a run failed"),
      );
    } finally {
      clearInterval(renew);
      this.sessions.delete(run.runid);
      await client.end().catch(() => {});
      await holdLease(project, run, false).catch(() => {});
    }
  }

  /** Ends the backends of the jobs still running (each run is recorded as failed) and waits for their runs. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      [...this.sessions.values()].map(({ project, pid }) =>
        project.adminPool.query("select pg_catalog.pg_terminate_backend($1)", [pid]).catch(() => {}),
      ),
    );
    await Promise.all(this.runs);
  }
}

/** Runs of the project older than RUNS_RETENTION, and beyond the newest RUNS_KEPT of each job, go. */
export function pruneRuns(project: ProjectRuntime): Promise<unknown> {
  return asScheduler(project, async (c) => {
    await c.query(`delete from cron.job_run_details where end_time < now() - interval '${RUNS_RETENTION}'`);
    await c.query(
      `delete from cron.job_run_details d using (
         select runid from (select runid, row_number() over (partition by jobid order by runid desc) as n
                              from cron.job_run_details) r
          where r.n > $1) old
        where d.runid = old.runid`,
      [RUNS_KEPT],
    );
  });
}
