import type pg from "pg";
import type { Logger } from "../log";
import { claimDuty } from "../platform/duties";

export interface EdgeEvent {
  ref: string;
  method: string;
  path: string;
  status: number;
  service: string;
  durationMs: number;
}

const MAX_BUFFERED = 10_000;
/** How often old log events are deleted (by one node). */
const EXPIRE_EVERY_MS = 5 * 60_000;
/**
 * API requests written as soon as this many wait (else every interval): under load, many small statements
 * instead of one large one a second, which would hold a database core for tens of milliseconds at once and
 * delay the requests running beside it.
 */
const EDGE_BATCH = 200;

/** A log event of one of the project's sources (edge_logs, auth_logs, postgres_logs). */
export interface LogEvent {
  ref: string;
  source: "edge_logs" | "auth_logs" | "postgres_logs";
  message: string;
  metadata: Record<string, unknown>;
  /** When it happened; now unless the event carries its own time (a Postgres log line). */
  at?: string;
}

/** An event as it waits in the buffer: its metadata already JSON text, its time in milliseconds or as text. */
interface BufferedEvent {
  ref: string;
  source: LogEvent["source"];
  message: string;
  metadata: string;
  at: number | string;
}

/**
 * API requests waiting to be written, one array per field: a request adds a few values, no object and no JSON
 * text; the statement that writes them builds each event's message and metadata.
 */
interface EdgeColumns {
  ref: string[];
  method: string[];
  path: string[];
  status: number[];
  service: string[];
  durationMs: number[];
  at: number[];
}

function noEdges(): EdgeColumns {
  return { ref: [], method: [], path: [], status: [], service: [], durationMs: [], at: [] };
}

/**
 * The batch's projects, each locked once against deletion until the batch is written (the table has no foreign
 * key, whose check would lock the project once per row): a project deleted meanwhile keeps none of its events.
 */
function liveProjects(refs: string): string {
  return `with live as (select p.ref from platform.projects p where p.ref in (${refs}) for key share)`;
}

/** The edge events of a batch as `platform.log_events` rows (message and metadata as `edge()` describes them). */
const INSERT_EDGES = `${liveProjects("select json_array_elements_text($1::json)")}
  insert into platform.log_events (project_ref, source, timestamp, event_message, metadata)
  select e.ref, 'edge_logs', to_timestamp(e.at::float8 / 1000.0), e.method || ' | ' || e.status || ' | ' || e.path,
         jsonb_build_object('request', jsonb_build_object('method', e.method, 'path', e.path),
                            'response', jsonb_build_object('status_code', e.status::int),
                            'service', e.service, 'duration_ms', e.duration_ms::float8)
    from rows from (json_array_elements_text($1::json), json_array_elements_text($2::json),
                    json_array_elements_text($3::json), json_array_elements_text($4::json),
                    json_array_elements_text($5::json), json_array_elements_text($6::json),
                    json_array_elements_text($7::json)) with ordinality
         as e(ref, method, path, status, service, duration_ms, at, n)
   where e.ref in (select ref from live)
   order by e.n`;

/**
 * Records each project's log events (API requests as `edge_logs`, auth events as `auth_logs`, the project's
 * Postgres log lines as `postgres_logs`) in `platform.log_events`: kept in memory and written in one
 * statement every second, so logging costs no database work on the request path; events older than the
 * retention are deleted every few minutes.
 */
export class LogRecorder {
  private buffer: BufferedEvent[] = [];
  private edges = noEdges();
  /** The statement writing API requests, while one runs (one at a time). */
  private edgesWriting: Promise<void> | null = null;
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
    this.sweeper = setInterval(() => void this.expire(), EXPIRE_EVERY_MS);
    this.sweeper.unref();
  }

  /**
   * An API request, on the request path of every data request. Saved as the message `<method> | <status> |
   * <path>` with the metadata `{"request":{"method","path"},"response":{"status_code"},"service","duration_ms"}`.
   */
  edge(event: EdgeEvent): void {
    // The path only: a query string may carry an API key.
    const end = event.path.indexOf("?");
    const path = end === -1 ? event.path : event.path.slice(0, end);
    const edges = this.edges;
    // A database that cannot keep up loses the oldest events (a tenth at a time), never the process's memory.
    if (edges.ref.length >= MAX_BUFFERED) {
      for (const column of Object.values(edges)) column.splice(0, MAX_BUFFERED / 10);
    }
    edges.ref.push(event.ref);
    edges.method.push(event.method);
    edges.path.push(path);
    edges.status.push(event.status);
    edges.service.push(event.service);
    edges.durationMs.push(event.durationMs);
    edges.at.push(Date.now());
    if (edges.ref.length >= EDGE_BATCH && this.edgesWriting === null) void this.flushEdges();
  }

  record(event: LogEvent): void {
    const { ref, source, message, metadata, at } = event;
    this.push({ ref, source, message, metadata: JSON.stringify(metadata), at: at ?? Date.now() });
  }

  private push(event: BufferedEvent): void {
    // A database that cannot keep up loses the oldest events, never the process's memory.
    if (this.buffer.length >= MAX_BUFFERED) this.buffer.shift();
    this.buffer.push(event);
  }

  /** Writes the buffered events: the API requests in one statement, the other events in another. */
  async flush(): Promise<void> {
    await Promise.all([this.flushEdges(), this.flushEvents()]);
  }

  private async flushEdges(): Promise<void> {
    // One statement at a time: the next batch waits for it (and goes at once if full by then).
    while (this.edgesWriting !== null) await this.edgesWriting;
    if (this.edges.ref.length === 0) return;
    const { ref, method, path, status, service, durationMs, at } = this.edges;
    this.edges = noEdges();
    this.edgesWriting = this.pool
      // Each column as JSON text (V8's own serializer), not as an array pg's driver writes element by element
      // in JavaScript: the statement goes on the thread that serves the requests.
      .query(
        INSERT_EDGES,
        [ref, method, path, status, service, durationMs, at].map((column) => JSON.stringify(column)),
      )
      .then(
        () => undefined,
        (e: Error) => this.log.warn({ err: e.message }, "log events could not be saved"),
      )
      .finally(() => {
        this.edgesWriting = null;
        if (this.edges.ref.length >= EDGE_BATCH) void this.flushEdges();
      });
    await this.edgesWriting;
  }

  /** The other events in one statement: five arrays, each event's metadata parsed once. */
  private async flushEvents(): Promise<void> {
    if (this.buffer.length === 0) return;
    const batch = this.buffer;
    this.buffer = [];
    const at = batch.map((e) => (typeof e.at === "number" ? new Date(e.at).toISOString() : e.at));
    try {
      await this.pool.query(
        `${liveProjects("select unnest($1::text[])")}
         insert into platform.log_events (project_ref, source, timestamp, event_message, metadata)
         select e.ref, e.source, e.at, e.message, e.metadata::jsonb
           from unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[], $5::text[]) with ordinality
                as e(ref, source, at, message, metadata, n)
          where e.ref in (select ref from live)
          order by e.n`,
        [
          batch.map((e) => e.ref),
          batch.map((e) => e.source),
          at,
          batch.map((e) => e.message),
          batch.map((e) => e.metadata),
        ],
      );
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, "log events could not be saved");
    }
  }

  /** Deletes the events past retention; one node of the installation does it each time. */
  async expire(): Promise<void> {
    try {
      if (!(await claimDuty(this.pool, "expire-log-events", EXPIRE_EVERY_MS))) return;
      await this.pool.query(
        "delete from platform.log_events where timestamp < now() - make_interval(hours => $1)",
        [this.retentionHours],
      );
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, "old log events could not be deleted");
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    clearInterval(this.sweeper);
    await this.flush();
  }
}
