import type pg from "pg";
import type { LogRecorder } from "./recorder";

/**
 * Turns the log lines of a cluster Strata runs (the embedded one: its postmaster's output, with the
 * `log_line_prefix` `%m [%p] host=%h db=%d `) into `postgres_logs` events of the project whose database
 * each line names. Lines of no database (checkpoints, the postmaster) and continuation lines belong to no
 * project and are left out. A DATABASE_URL cluster's log is not Strata's to read: its projects have no
 * postgres_logs.
 */

const LINE =
  /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: \S+)?) \[(\d+)\] host=(\S*) db=(\S*) ([A-Z0-9]+):\s+(.*)$/;

/** A database not found is looked up again at most this often (a project made since the last lookup). */
const RELOAD_MS = 2000;

/** A statement that set a password (a failing `alter role ... password '...'`) is logged without it. */
function redact(message: string): string {
  return message.replace(/(password\s+)'(?:[^']|'')*'/gi, "$1'********'");
}

export class PostgresLogReader {
  private projects = new Map<string, string>();
  private loadedAt = 0;
  private loading: Promise<void> | undefined;
  private pending: { line: RegExpExecArray; at: string }[] = [];

  constructor(
    private readonly platformPool: pg.Pool,
    /** platform.clusters.id of the cluster whose log this is. */
    private readonly clusterId: string,
    private readonly logs: LogRecorder,
  ) {}

  observe(line: string): void {
    const m = LINE.exec(line.trimEnd());
    if (!m || !m[4] || m[4] === "[unknown]") return;
    const parsed = Date.parse(m[1].replace(" ", "T").replace(/ UTC$/, "Z"));
    const at = new Date(Number.isNaN(parsed) ? Date.now() : parsed).toISOString();
    const ref = this.projects.get(m[4]);
    if (ref) this.emit(ref, m, at);
    else {
      this.pending.push({ line: m, at });
      if (this.pending.length > 1000) this.pending.shift();
      void this.reload();
    }
  }

  private emit(ref: string, m: RegExpExecArray, at: string): void {
    const [, , pid, host, database, severity, message] = m;
    this.logs.record({
      ref,
      source: "postgres_logs",
      at,
      message: redact(message),
      metadata: {
        parsed: {
          error_severity: severity,
          database_name: database,
          connection_from: host || null,
          process_id: Number(pid),
        },
      },
    });
  }

  private reload(): Promise<void> {
    if (this.loading) return this.loading;
    const wait = Math.max(0, this.loadedAt + RELOAD_MS - Date.now());
    this.loading = new Promise<void>((resolve) => setTimeout(resolve, wait).unref())
      .then(async () => {
        const { rows } = await this.platformPool.query<{ database_name: string; ref: string }>(
          "select database_name, ref from platform.projects where cluster_id = $1",
          [this.clusterId],
        );
        this.projects = new Map(rows.map((r) => [r.database_name, r.ref]));
        this.loadedAt = Date.now();
        const pending = this.pending;
        this.pending = [];
        for (const { line, at } of pending) {
          const ref = this.projects.get(line[4]);
          if (ref) this.emit(ref, line, at);
        }
      })
      .catch(() => {})
      .finally(() => (this.loading = undefined));
    return this.loading;
  }
}
