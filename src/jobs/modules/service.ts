import type pg from "pg";
import type { AppContext } from "../../context";
import { CATALOG_ONLY_SESSION, withOneOffClient } from "../../db/client";
import { withDatabase } from "../../db/urls";
import { provideVaultKey } from "../../modules/vault";
import { kekOf } from "../../platform/kek";
import type { ProjectRuntime } from "../../projects/runtime";
import { claimDueRuns, CronRunner, pruneRuns } from "./cron";
import { drainQueue, pruneResponses } from "./net";

/**
 * The workers behind the database modules (sql/project/700-739) on this node: cron's scheduler and net's
 * sender, for the projects that use them, and each project's vault key in its database.
 *
 * Which projects use them is found by looking: every DISCOVER_MS at the projects this node has open (on their
 * superuser pool, which reads only Strata's tables and the catalog), and, a few at a time, every
 * CLOSED_PROBE_MS at the others (one-off connections), so a project whose jobs were scheduled over a direct
 * connection runs them even when no request opened it. A project with active jobs or queued requests is kept
 * open while it has them. Where a project has the real pg_cron or pg_net (a DATABASE_URL cluster that loads them
 * for its database), that extension does the work, and the log says so once.
 */

const DISCOVER_MS = 3000;
const CLOSED_PROBE_MS = 60_000;
const CLOSED_PROBES_PER_ROUND = 20;
const CRON_TICK_MS = 500;
const NET_TICK_MS = 200;
/** A project whose queue stayed empty this long is left to discovery again. */
const NET_IDLE_MS = 60_000;
/** How often each open project's old runs and answers are removed and its vault key checked. */
const REVISIT_MS = 10 * 60_000;
const WARN_EVERY_MS = 60_000;
const STOP_WAIT_MS = 5000;

interface ModuleState {
  /** Strata's cron (sql/project/710_cron.sql), or the real extension's. */
  cronModule: boolean;
  cronExtension: boolean;
  netModule: boolean;
  netExtension: boolean;
  activeJobs: boolean;
  queuedRequests: boolean;
}

/**
 * Whether the extension named by the parameter `$n` owns the table named by `$n+1` (as _strata.extension_owns,
 * sql/project/800): a real pg_cron owns cron.job; Strata's marker of that name (src/db/installation.ts) owns
 * nothing, and Strata's module serves the project.
 */
const ownsTable = (n: number) =>
  `exists (select from pg_depend d join pg_extension e on e.oid = d.refobjid
            where e.extname = $${n} and d.refclassid = 'pg_extension'::regclass and d.classid = 'pg_class'::regclass
              and d.objid = to_regclass($${n + 1}) and d.deptype = 'e')`;

/** What a project's database says of its modules, read on a superuser connection (Strata's tables only). */
async function probe(client: pg.ClientBase): Promise<ModuleState> {
  const { rows } = await client.query(
    `select ${ownsTable(1)} as cron_extension, ${ownsTable(3)} as net_extension,
            to_regclass('cron.job') is not null as cron, to_regclass('net.http_request_queue') is not null as net`,
    ["pg_cron", "cron.job", "pg_net", "net.http_request_queue"],
  );
  const found = rows[0];
  const cronModule = found.cron && !found.cron_extension;
  const netModule = found.net && !found.net_extension;
  const answer = async (sql: string) => (await client.query(sql)).rows[0].found as boolean;
  return {
    cronModule,
    cronExtension: found.cron_extension,
    netModule,
    netExtension: found.net_extension,
    activeJobs: cronModule && (await answer("select exists (select from cron.job where active) as found")),
    queuedRequests:
      netModule && (await answer("select exists (select from net.http_request_queue) as found")),
  };
}

export class DatabaseModules {
  private readonly runner: CronRunner;
  private readonly cronProjects = new Set<string>();
  /** Projects whose queue this node empties, with when it last sent something. */
  private readonly netProjects = new Map<string, number>();
  private readonly timers: NodeJS.Timeout[] = [];
  /** One piece of work per kind and project at a time. */
  private readonly busy = new Map<string, Promise<void>>();
  private readonly probedAt = new Map<string, number>();
  private readonly prunedAt = new Map<string, number>();
  /** When this node last made sure each project's database has its vault key. */
  private readonly keyedAt = new Map<string, number>();
  private readonly announced = new Set<string>();
  private readonly warnedAt = new Map<string, number>();
  private stopped = false;

  constructor(private readonly ctx: AppContext) {
    this.runner = new CronRunner(ctx);
  }

  start(): void {
    const every = (ms: number, work: () => void) => {
      const timer = setInterval(work, ms);
      timer.unref();
      this.timers.push(timer);
    };
    this.once("discover", "", () => this.discover());
    every(DISCOVER_MS, () => this.once("discover", "", () => this.discover()));
    every(CRON_TICK_MS, () => {
      for (const ref of this.cronProjects) this.once("cron", ref, () => this.claimRuns(ref));
    });
    every(NET_TICK_MS, () => {
      for (const ref of this.netProjects.keys()) this.once("net", ref, () => this.sendRequests(ref));
    });
  }

  /**
   * Stops looking and claiming, ends the jobs running here (recorded as failed) and waits for the work under way,
   * requests being sent at most STOP_WAIT_MS (a request still unanswered then is lost, as with pg_net).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
    await Promise.race([
      Promise.all(this.busy.values()),
      new Promise((resolve) => setTimeout(resolve, STOP_WAIT_MS).unref()),
    ]);
    await this.runner.stop();
  }

  /** Runs `work` unless the same kind of work for `ref` is still running; logs its failure (once a minute). */
  private once(kind: string, ref: string, work: () => Promise<void>): void {
    const key = `${kind}:${ref}`;
    if (this.stopped || this.busy.has(key)) return;
    const running = work()
      .catch((e: Error) => {
        const last = this.warnedAt.get(key) ?? 0;
        if (Date.now() - last < WARN_EVERY_MS) return;
        this.warnedAt.set(key, Date.now());
        this.ctx.log.warn({ ref: ref || undefined, err: e.message }, `database modules: ${kind} failed`);
      })
      .finally(() => this.busy.delete(key));
    this.busy.set(key, running);
  }

  /** The project's runtime (opening it counts as a use: a project with work stays open). */
  private async runtime(ref: string): Promise<ProjectRuntime | undefined> {
    const project = await this.ctx.registry.get(ref);
    return project?.record.status === "ACTIVE_HEALTHY" ? project : undefined;
  }

  private async claimRuns(ref: string): Promise<void> {
    const project = await this.runtime(ref);
    const room = this.runner.roomFor(ref);
    if (!project || room <= 0) return;
    // Runs claimed as the node stops are not started: their lease ends, and another node records them failed.
    for (const run of await claimDueRuns(project, room)) if (!this.stopped) this.runner.start(project, run);
  }

  private async sendRequests(ref: string): Promise<void> {
    const project = await this.runtime(ref);
    if (!project) return;
    if (await drainQueue(this.ctx, project)) this.netProjects.set(ref, Date.now());
    else if (Date.now() - (this.netProjects.get(ref) ?? 0) > NET_IDLE_MS) this.netProjects.delete(ref);
  }

  private async discover(): Promise<void> {
    const { rows } = await this.ctx.platformPool.query<{
      ref: string;
      database_name: string;
      admin_url: string;
    }>(
      `select p.ref, p.database_name, c.admin_url
         from platform.projects p join platform.clusters c on c.id = p.cluster_id
        where p.status = 'ACTIVE_HEALTHY'`,
    );
    const live = new Set(rows.map((r) => r.ref));
    for (const ref of this.cronProjects) if (!live.has(ref)) this.cronProjects.delete(ref);
    for (const ref of this.netProjects.keys()) if (!live.has(ref)) this.netProjects.delete(ref);
    const open = new Map((await this.ctx.registry.open()).map((r) => [r.ref, r]));
    let closedProbes = 0;
    for (const row of rows) {
      if (this.stopped) return;
      const project = open.get(row.ref);
      if (!project) {
        if (closedProbes >= CLOSED_PROBES_PER_ROUND) continue;
        if (Date.now() - (this.probedAt.get(row.ref) ?? 0) < CLOSED_PROBE_MS) continue;
        closedProbes++;
        this.probedAt.set(row.ref, Date.now());
      }
      const look = (client: pg.ClientBase) => this.look(row.ref, client);
      try {
        if (!project) {
          const url = kekOf(this.ctx.platformPool).open(row.admin_url, "platform.clusters.admin_url");
          await withOneOffClient(
            { connectionString: withDatabase(url, row.database_name), options: CATALOG_ONLY_SESSION },
            look,
          );
        } else if (project.record.status === "ACTIVE_HEALTHY") {
          await this.prune(project, await this.onPool(project.adminPool, look));
        }
      } catch {
        // The project's database is away (restarting, being moved): the next round looks again.
      }
    }
  }

  private async onPool<T>(pool: pg.Pool, work: (client: pg.ClientBase) => Promise<T>): Promise<T> {
    const client = await pool.connect();
    try {
      return await work(client);
    } finally {
      client.release();
    }
  }

  /** Reads the project's modules on `client` and puts it among the projects this node works for. */
  private async look(ref: string, client: pg.ClientBase): Promise<ModuleState> {
    // Again now and then: a project moved to another cluster (an upgrade) has a new database.
    if (Date.now() - (this.keyedAt.get(ref) ?? 0) > REVISIT_MS) {
      await provideVaultKey(this.ctx.platformPool, ref, client);
      this.keyedAt.set(ref, Date.now());
    }
    const state = await probe(client);
    this.announce(ref, state);
    if (state.activeJobs) this.cronProjects.add(ref);
    else this.cronProjects.delete(ref);
    if (state.queuedRequests && !this.netProjects.has(ref)) this.netProjects.set(ref, Date.now());
    if (state.activeJobs || state.queuedRequests) await this.runtime(ref);
    return state;
  }

  private announce(ref: string, state: ModuleState): void {
    for (const [extension, present] of [
      ["pg_cron", state.cronExtension],
      ["pg_net", state.netExtension],
    ] as const) {
      if (!present || this.announced.has(`${extension}:${ref}`)) continue;
      this.announced.add(`${extension}:${ref}`);
      this.ctx.log.info(
        { ref },
        `database modules: the cluster's ${extension} extension serves this project`,
      );
    }
  }

  /** Removes the project's old runs and answers (Strata's modules only, not a real extension's tables). */
  private async prune(project: ProjectRuntime, state: ModuleState): Promise<void> {
    if (Date.now() - (this.prunedAt.get(project.ref) ?? 0) < REVISIT_MS) return;
    this.prunedAt.set(project.ref, Date.now());
    if (state.cronModule) await pruneRuns(project);
    if (state.netModule) await pruneResponses(project);
  }
}
