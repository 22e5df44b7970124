import type pg from "pg";
import type { Logger } from "../log";

export interface EdgeEvent {
  ref: string;
  method: string;
  path: string;
  status: number;
  service: string;
  durationMs: number;
}

const MAX_BUFFERED = 10_000;

/** A log event of one of the project's sources (edge_logs, auth_logs, postgres_logs). */
export interface LogEvent {
  ref: string;
  source: "edge_logs" | "auth_logs" | "postgres_logs";
  message: string;
  metadata: Record<string, unknown>;
  /** When it happened; now unless the event carries its own time (a Postgres log line). */
  at?: string;
}

/**
 * Records each project's log events (API requests as `edge_logs`, auth events as `auth_logs`, the project's
 * Postgres log lines as `postgres_logs`) in `platform.log_events`: kept in memory and written in one
 * statement every second, so logging costs no database work on the request path; events older than the
 * retention are deleted every few minutes.
 */
export class LogRecorder {
  private buffer: Required<LogEvent>[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
    private readonly retentionHours: number,
    intervalMs = 1000,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
    this.sweeper = setInterval(() => void this.expire(), 5 * 60_000);
    this.sweeper.unref();
  }

  edge(event: EdgeEvent): void {
    // The path only: a query string may carry an API key.
    const path = event.path.split("?")[0];
    this.record({
      ref: event.ref,
      source: "edge_logs",
      message: `${event.method} | ${event.status} | ${path}`,
      metadata: {
        request: { method: event.method, path },
        response: { status_code: event.status },
        service: event.service,
        duration_ms: event.durationMs,
      },
    });
  }

  record(event: LogEvent): void {
    // A database that cannot keep up loses the oldest events, never the process's memory.
    if (this.buffer.length >= MAX_BUFFERED) this.buffer.shift();
    this.buffer.push({ ...event, at: event.at ?? new Date().toISOString() });
  }

  async flush(): Promise<void> {
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    try {
      await this.pool.query(
        `insert into platform.log_events (project_ref, source, timestamp, event_message, metadata)
         select e.ref, e.source, e.at, e.message, e.metadata
           from jsonb_array_elements($1::jsonb) with ordinality as a(value, n),
                jsonb_to_record(a.value) as e(ref text, source text, at timestamptz, message text, metadata jsonb)
          where exists (select 1 from platform.projects p where p.ref = e.ref)
          order by a.n`,
        [JSON.stringify(batch)],
      );
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, "log events could not be saved");
    }
  }

  async expire(): Promise<void> {
    await this.pool
      .query("delete from platform.log_events where timestamp < now() - make_interval(hours => $1)", [
        this.retentionHours,
      ])
      .catch((e: Error) => this.log.warn({ err: e.message }, "old log events could not be deleted"));
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.sweeper);
    await this.flush();
  }
}
