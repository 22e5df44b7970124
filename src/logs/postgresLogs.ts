import type pg from "pg";
import type { ClusterLogRecord } from "../db/clusterLog";
import type { LogRecorder } from "./recorder";

/**
 * Turns the log records of a cluster Strata runs (the embedded one, read as records: db/clusterLog.ts) into
 * `postgres_logs` events of the project whose database each record names: the message with its severity,
 * then its DETAIL, HINT, CONTEXT and STATEMENT as events of their own, as the server's text log writes them.
 * Records of no database (checkpoints, the postmaster) belong to no project and are left out. A DATABASE_URL
 * cluster's log is not Strata's to read: its projects have no postgres_logs.
 */

/** A database not found is looked up again at most this often (a project made since the last lookup). */
const RELOAD_MS = 2000;

/** A statement that set a password (a failing `alter role ... password '...'`) is logged without it. */
function redact(message: string): string {
  return message.replace(/(password\s+)'(?:[^']|'')*'/gi, "$1'********'");
}

/** The parts of a record that become events, in the order the text log writes them. */
function partsOf(record: ClusterLogRecord): [severity: string, message: string][] {
  const parts: [string, string | undefined][] = [
    [record.error_severity, record.message],
    ["DETAIL", record.detail],
    ["HINT", record.hint],
    ["CONTEXT", record.context],
    ["STATEMENT", record.statement],
  ];
  return parts.filter((p): p is [string, string] => p[1] !== undefined);
}

export class PostgresLogReader {
  private projects = new Map<string, string>();
  private loadedAt = 0;
  private loading: Promise<void> | undefined;
  private pending: { record: ClusterLogRecord; database: string; at: string }[] = [];

  constructor(
    private readonly platformPool: pg.Pool,
    /** platform.clusters.id of the cluster whose log this is. */
    private readonly clusterId: string,
    private readonly logs: LogRecorder,
  ) {}

  observe(record: ClusterLogRecord): void {
    const database = record.dbname;
    if (!database) return;
    const parsed = Date.parse(record.timestamp.replace(" ", "T").replace(/ UTC$/, "Z"));
    const at = new Date(Number.isNaN(parsed) ? Date.now() : parsed).toISOString();
    const ref = this.projects.get(database);
    if (ref) this.emit(ref, record, database, at);
    else {
      this.pending.push({ record, database, at });
      if (this.pending.length > 1000) this.pending.shift();
      void this.reload();
    }
  }

  private emit(ref: string, record: ClusterLogRecord, database: string, at: string): void {
    for (const [severity, message] of partsOf(record))
      this.logs.record({
        ref,
        source: "postgres_logs",
        at,
        message: redact(message),
        metadata: {
          parsed: {
            error_severity: severity,
            database_name: database,
            connection_from: record.remote_host ?? null,
            process_id: record.pid ?? null,
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
        for (const { record, database, at } of pending) {
          const ref = this.projects.get(database);
          if (ref) this.emit(ref, record, database, at);
        }
      })
      .catch(() => {})
      .finally(() => (this.loading = undefined));
    return this.loading;
  }
}
