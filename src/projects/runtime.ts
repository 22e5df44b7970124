import { EventEmitter } from "node:events";
import pg from "pg";
import { CATALOG_ONLY_SESSION } from "../db/client";
import { isSchemaChanged } from "../db/errors";
import { SCHEMA_CHECK } from "../db/pipeline";
import { enforceStatementDeadline } from "../db/statementDeadline";
import { withPort } from "../db/urls";
import type { Logger } from "../log";

/** A project as the control plane stores it. */
export interface ProjectRecord {
  id: number;
  ref: string;
  name: string;
  organizationId: string;
  status: string;
  /** platform.clusters.id of the cluster the database lives on. */
  clusterId: string;
  /** Connections of the data pool (the pooler's `default_pool_size`). */
  poolSize: number;
  isDefault: boolean;
  jwtSecret: string;
  legacyKeysIat: number;
  legacyKeysEnabled: boolean;
  /** Superuser URL of the project's database. */
  adminUrl: string;
  /** URL of the project's database as `authenticator_<ref>`, the role data requests log in as. */
  dataUrl: string;
  /** The project's owner role (`postgres_<ref>`, not a superuser). */
  ownerRole: string;
  /** URL as `strata_sql_<ref>`, a member of the owner: the Management API's SQL and migrations. */
  sqlUrl: string;
  /** URL as `strata_read_<ref>`: read-only SQL, SELECT on the project's own schemas only. */
  readUrl: string;
  /** URL as `strata_auth_<ref>`, the auth service's login: the auth schema's rows, the hooks granted to it. */
  authUrl: string;
  /** Ports (on the primary's host) of the project's ACTIVE_HEALTHY read replicas: REST reads go there. */
  replicaPorts?: number[];
  /** The row's xmin when loaded: a change notice for this version is one the runtime already has. */
  rowVersion?: string;
}

/** Data pool size of a project whose pooler settings do not say. */
export const DEFAULT_POOL_SIZE = 10;
/** A pooled connection idle this long is closed. */
export const POOL_IDLE_MS = 30_000;

/**
 * The auth service's sessions resolve names in the catalog and the auth schema only, never in a schema the
 * tenant writes: set at connection (it outranks the role's own defaults, which the role may change).
 */
const AUTH_SEARCH_PATH = "pg_catalog,auth,pg_temp";

/** Notices of the DDL watch within this window cause one schema rebuild. */
const DDL_DEBOUNCE_MS = 50;

/** Times a data request is planned again after the schema changed under it before its failure is answered. */
const SCHEMA_ATTEMPTS = 3;

/** The bounds of a request on a project's pools, and what a new data connection gets first. */
export interface PoolLimits {
  /** How long a request waits for a free connection (default 10 s). */
  waitMs?: number;
  /** How long a statement of a data request may go unanswered (a hung server) before it fails; none if unset. */
  statementMs?: number;
  /**
   * Prepares each new connection of the data pool before its first request (the vault key:
   * src/modules/vault.ts). Not the read replicas': a standby makes no temporary table.
   */
  prepareDataSession?: (client: pg.ClientBase, project: ProjectRuntime) => Promise<void>;
}

/** How long a replaced pool or runtime stays open for the requests still running on it. */
export const RETIRE_GRACE_MS = 10_000;

/**
 * The live side of one project: its pools, its DDL watch and the caches derived from its schema. Data
 * interfaces keep what they derive from the catalog (GraphQL schemas, the REST schema cache) in `caches`,
 * which is emptied whenever the schema changes.
 */
export class ProjectRuntime {
  readonly events = new EventEmitter();
  /** Cleared on every schema change; keys are owned by the interface that fills them. */
  readonly caches = new Map<string, unknown>();
  /** Bumped on every schema change. */
  schemaVersion = 0;
  /**
   * The database's schema version (sql/project/820_schema_version.sql) that `caches` reflect: read after each
   * change before anything is derived again, so that what is derived is never older than it.
   */
  private databaseSchemaVersion: Promise<string> | undefined;
  private dataPoolInstance: pg.Pool | undefined;
  /** Data pools replaced after a schema change, ending after RETIRE_GRACE_MS (or at close). */
  private readonly retiredPools = new Set<pg.Pool>();
  private adminPoolInstance: pg.Pool | undefined;
  private authPoolInstance: pg.Pool | undefined;
  private ownerPoolInstance: pg.Pool | undefined;
  /** Data-login pools on the read replicas, taken in turn by readPool. */
  private replicaPoolInstances: pg.Pool[] | undefined;
  private nextReplica = 0;
  private listener: pg.Client | undefined;
  private closed = false;
  /** Work that must finish on the project's database before its pools end (realtime drops its slot). */
  private readonly closeHooks = new Set<() => Promise<void>>();

  constructor(
    public record: ProjectRecord,
    private readonly log: Logger,
    /** Superuser pool on the main database: the auth gate reads the project's keys from the control plane. */
    readonly platformPool: pg.Pool,
    private readonly limits: PoolLimits = {},
  ) {
    this.events.setMaxListeners(100);
  }

  get ref(): string {
    return this.record.ref;
  }

  /** Pool of the project's data login (`authenticator_<ref>`) for data requests. */
  get dataPool(): pg.Pool {
    const prepare = this.limits.prepareDataSession;
    this.dataPoolInstance ??= this.makePool(this.record.dataUrl, this.record.poolSize, {
      timed: true,
      onConnect: prepare && ((client) => prepare(client, this)),
    });
    return this.dataPoolInstance;
  }

  /**
   * The pool a read-only data request runs on: the project's read replicas in turn when it has any (the same
   * data login, role and claims: the standby has every role and grant of the primary), else the
   * data pool.
   */
  get readPool(): pg.Pool {
    const ports = this.record.replicaPorts ?? [];
    if (!ports.length) return this.dataPool;
    this.replicaPoolInstances ??= ports.map((port) =>
      this.makePool(withPort(this.record.dataUrl, port), this.record.poolSize, { timed: true }),
    );
    this.nextReplica = (this.nextReplica + 1) % this.replicaPoolInstances.length;
    return this.replicaPoolInstances[this.nextReplica];
  }

  /** Small superuser pool for management work on the project's database (names resolve in pg_catalog only). */
  get adminPool(): pg.Pool {
    this.adminPoolInstance ??= this.makePool(this.record.adminUrl, 3, { options: CATALOG_ONLY_SESSION });
    return this.adminPoolInstance;
  }

  /**
   * Small pool of `strata_auth_<ref>` connections for the auth service: its statements, and the project's
   * Postgres-function hooks, run as that role, never as the superuser.
   */
  get authPool(): pg.Pool {
    this.authPoolInstance ??= this.makePool(this.record.authUrl, 3, {
      options: `-c search_path=${AUTH_SEARCH_PATH}`,
      timed: true,
    });
    return this.authPoolInstance;
  }

  /**
   * Small pool of the project's SQL login (`strata_sql_<ref>`, a member of its owner) for the work Strata does
   * on the project's behalf in the schemas its owner owns (storage's tables, as on the platform): each
   * transaction acts as the owner (`asOwnerScope`), so the triggers, views and functions the owner put there
   * run with the owner's rights, never the superuser's.
   */
  get ownerPool(): pg.Pool {
    this.ownerPoolInstance ??= this.makePool(this.record.sqlUrl, 3, { options: CATALOG_ONLY_SESSION });
    return this.ownerPoolInstance;
  }

  /** The transaction scope of work on `ownerPool`: the owner's role, no claims. */
  get asOwnerScope(): { role: string; claims: Record<string, never> } {
    return { role: this.record.ownerRole, claims: {} };
  }

  /**
   * A pool of the project's database. `timed`: every statement has the client-side deadline of data requests
   * (the pools a data request uses: data, replicas, and auth, which reads the roles a request may assume);
   * the admin and owner pools run work that may rightly take longer (replication slots, loads).
   */
  private makePool(
    connectionString: string,
    max: number,
    {
      options,
      timed = false,
      onConnect,
    }: { options?: string; timed?: boolean; onConnect?: (client: pg.ClientBase) => Promise<void> } = {},
  ): pg.Pool {
    // A request waits a bounded time for a connection, then fails (503) instead of queueing forever.
    const pool = new pg.Pool({
      connectionString,
      options,
      max,
      idleTimeoutMillis: POOL_IDLE_MS,
      connectionTimeoutMillis: this.limits.waitMs ?? 10_000,
      // pg-pool awaits it before it hands the connection out (its types say void).
      onConnect,
    });
    if (timed && this.limits.statementMs) enforceStatementDeadline(pool, this.limits.statementMs);
    // An idle client losing its connection (database restarted) must not crash the process.
    pool.on("error", (e) =>
      this.log.warn({ ref: this.ref, err: e.message }, "idle database connection lost"),
    );
    return pool;
  }

  /** Forgets everything derived from the schema; the next request rebuilds it. */
  invalidateSchema(reason: string): void {
    this.schemaVersion++;
    this.databaseSchemaVersion = undefined;
    this.caches.clear();
    this.retireDataPool();
    this.log.debug({ ref: this.ref, reason }, "schema changed");
    this.events.emit("schema-changed", reason);
  }

  /**
   * Runs a data request planned on the schema caches, with the database's schema version they reflect
   * (`TransactionScope.schemaVersion`). The DDL watch's notice of a change made through another node (or any
   * other connection) may arrive after the next request: that request's own round trip finds the newer version
   * and fails before anything ran, and it is planned again on caches derived anew.
   */
  async onCurrentSchema<T>(work: (schemaVersion: string) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const read = this.currentSchemaVersion();
      const version = await read;
      try {
        return await work(version);
      } catch (e) {
        if (!isSchemaChanged(e) || attempt === SCHEMA_ATTEMPTS) throw e;
        // Once for the requests that failed together.
        if (this.databaseSchemaVersion === read) this.invalidateSchema("changed through another connection");
      }
    }
  }

  /**
   * Fails as a request's statement would (`isSchemaChanged`) when the schema changed after `schemaVersion`: for a
   * request answered from the caches alone (a plan's error, an introspection), which sent no statement.
   */
  async confirmSchemaVersion(schemaVersion: string): Promise<void> {
    await this.dataPool.query(SCHEMA_CHECK, [schemaVersion]);
  }

  /** The schema version the caches reflect, read on the data login when not known since the last change. */
  private currentSchemaVersion(): Promise<string> {
    if (this.databaseSchemaVersion) return this.databaseSchemaVersion;
    const read = this.dataPool
      .query<{ version: string }>(
        "select coalesce(sum(changes), 0)::text as version from extensions.strata_schema_changes",
      )
      .then(({ rows }) => rows[0]!.version);
    this.databaseSchemaVersion = read;
    read.then(
      // What was derived while the version was read may be older than it (the requests awaiting it come after).
      () => this.databaseSchemaVersion === read && this.caches.clear(),
      () => this.databaseSchemaVersion === read && (this.databaseSchemaVersion = undefined),
    );
    return read;
  }

  /** LISTENs for the DDL watch's notices (sql/project/004_ddl_watch.sql). Reconnects when the database returns. */
  async watchSchema(): Promise<void> {
    if (this.closed || this.listener) return;
    const client = new pg.Client({ connectionString: this.record.adminUrl });
    this.listener = client;
    const retry = () => {
      if (this.listener === client) this.listener = undefined;
      client.end().catch(() => {});
      if (!this.closed) setTimeout(() => this.watchSchema().catch(() => {}), 1000).unref();
    };
    client.on("error", retry);
    // A migration of many statements notifies once per statement: one rebuild for a burst.
    let pending: NodeJS.Timeout | undefined;
    client.on("notification", (msg) => {
      if (pending) return;
      pending = setTimeout(() => {
        pending = undefined;
        this.invalidateSchema(`ddl: ${msg.payload}`);
      }, DDL_DEBOUNCE_MS);
      pending.unref();
    });
    try {
      await client.connect();
      await client.query("listen strata_ddl");
      // Anything may have changed while the listener was away.
      this.invalidateSchema("watch (re)connected");
    } catch {
      retry();
    }
  }

  /**
   * Pooled connections keep the prepared statements GraphQL planned against the old schema, which
   * Postgres refuses once a result type changed ("cached plan must not change result type"): new
   * requests get new connections, and the old pool ends once its running requests had time to finish.
   */
  private retireDataPool(): void {
    const pools = [this.dataPoolInstance, ...(this.replicaPoolInstances ?? [])];
    this.dataPoolInstance = undefined;
    this.replicaPoolInstances = undefined;
    for (const pool of pools) {
      if (!pool) continue;
      this.retiredPools.add(pool);
      setTimeout(() => {
        if (this.retiredPools.delete(pool)) pool.end().catch(() => {});
      }, RETIRE_GRACE_MS).unref();
    }
  }

  /** Stops the DDL watch; the pools stay open for the requests still running on this runtime. */
  stopWatching(): void {
    this.closed = true;
    const listener = this.listener;
    this.listener = undefined;
    listener?.end().catch(() => {});
  }

  /** Runs `hook` when the runtime closes (pause, delete, restart, retirement), before its pools end. */
  onClose(hook: () => Promise<void>): void {
    this.closeHooks.add(hook);
  }

  async close(): Promise<void> {
    this.stopWatching();
    this.events.emit("closed");
    const hooks = [...this.closeHooks];
    this.closeHooks.clear();
    await Promise.all(hooks.map((hook) => hook().catch(() => {})));
    const retired = [...this.retiredPools];
    this.retiredPools.clear();
    await Promise.all([
      ...retired.map((pool) => pool.end().catch(() => {})),
      this.dataPoolInstance?.end().catch(() => {}),
      this.adminPoolInstance?.end().catch(() => {}),
      this.authPoolInstance?.end().catch(() => {}),
      this.ownerPoolInstance?.end().catch(() => {}),
      ...(this.replicaPoolInstances ?? []).map((pool) => pool.end().catch(() => {})),
    ]);
    this.replicaPoolInstances = undefined;
    this.dataPoolInstance = undefined;
    this.adminPoolInstance = undefined;
    this.authPoolInstance = undefined;
    this.ownerPoolInstance = undefined;
  }
}
