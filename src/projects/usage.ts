import type pg from "pg";
import type { Logger } from "../log";

export type UsageService = "rest" | "auth" | "realtime" | "storage";

/**
 * Counts data requests per project, service and minute in memory and adds them to `platform.api_usage`
 * every few seconds, so counting costs no database work on the request path.
 */
export class UsageRecorder {
  private counts = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
    intervalMs = 5000,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  private minute = { number: 0, text: "" };

  /** The current minute as ISO text, formatted once per minute. */
  private currentMinute(): string {
    const number = Math.floor(Date.now() / 60_000);
    if (number !== this.minute.number)
      this.minute = { number, text: new Date(number * 60_000).toISOString() };
    return this.minute.text;
  }

  record(ref: string, service: UsageService): void {
    const minute = this.currentMinute();
    const key = `${ref}|${service}|${minute}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  async flush(): Promise<void> {
    if (this.counts.size === 0) return;
    const batch = [...this.counts];
    this.counts = new Map();
    const rows = batch.map(([key, n]) => [...key.split("|"), n] as [string, string, string, number]);
    try {
      await this.pool.query(
        `insert into platform.api_usage (project_ref, service, minute, requests)
         select r, s, m::timestamptz, n from unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) as t(r, s, m, n)
          where exists (select 1 from platform.projects p where p.ref = t.r)
         on conflict (project_ref, minute, service) do update set requests = api_usage.requests + excluded.requests`,
        [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map((r) => r[2]), rows.map((r) => r[3])],
      );
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, "usage counters could not be saved");
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
