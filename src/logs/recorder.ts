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

type Buffered = EdgeEvent & { at: string };

/**
 * Records each project's API requests as the platform's `edge_logs` source in `platform.log_events`: kept in
 * memory and written in one statement every second, so logging costs no database work on the request path;
 * events older than the retention are deleted every few minutes.
 */
export class LogRecorder {
  private buffer: Buffered[] = [];
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
    // A database that cannot keep up loses the oldest events, never the process's memory.
    if (this.buffer.length >= MAX_BUFFERED) this.buffer.shift();
    // The path only: a query string may carry an API key.
    this.buffer.push({ ...event, path: event.path.split("?")[0], at: new Date().toISOString() });
  }

  async flush(): Promise<void> {
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    try {
      await this.pool.query(
        `insert into platform.log_events (project_ref, source, timestamp, event_message, metadata)
         select e.ref, 'edge_logs', e.at, e.method || ' | ' || e.status || ' | ' || e.path,
                jsonb_build_object('request', jsonb_build_object('method', e.method, 'path', e.path),
                                   'response', jsonb_build_object('status_code', e.status),
                                   'service', e.service, 'duration_ms', e.duration_ms)
           from jsonb_to_recordset($1::jsonb)
                as e(ref text, method text, path text, status int, service text, duration_ms float8, at timestamptz)
          where exists (select 1 from platform.projects p where p.ref = e.ref)`,
        [JSON.stringify(batch.map((e) => ({ ...e, duration_ms: e.durationMs })))],
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
