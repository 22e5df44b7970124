import pg from "pg";
import { HostDirectory } from "./hostnames";
import type { Logger } from "../log";
import { withCredentials, withDatabase } from "../db/urls";
import { randomSecret } from "../platform/ids";
import { kekOf, type KeyEncryptionKey } from "../platform/kek";
import { prepareProjectDatabase, projectAuthenticator } from "./clusters";
import {
  DEFAULT_POOL_SIZE,
  ProjectRecord,
  ProjectRuntime,
  RETIRE_GRACE_MS,
  type PoolLimits,
} from "./runtime";

const PROJECT_SELECT = `
  select p.id, p.ref, p.name, p.organization_id, p.status, p.is_default, p.jwt_secret, p.legacy_keys_iat,
         p.legacy_keys_enabled, p.database_name, p.sql_role_password, p.read_role_password, p.auth_role_password,
         c.admin_url,
         c.authenticator_password, p.cluster_id, p.xmin::text as row_version,
         (select (s.value->>'default_pool_size')::int from platform.project_settings s
           where s.project_ref = p.ref and s.kind = 'pooler') as pool_size,
         array(select r.port from platform.read_replicas r
                where r.project_ref = p.ref and r.status = 'ACTIVE_HEALTHY' order by r.id) as replica_ports
    from platform.projects p join platform.clusters c on c.id = p.cluster_id`;

function toRecord(row: any, kek: KeyEncryptionKey): ProjectRecord {
  const open = (value: string | null, purpose: string) => (value === null ? "" : kek.open(value, purpose));
  const adminUrl = withDatabase(open(row.admin_url, "platform.clusters.admin_url"), row.database_name);
  return {
    id: row.id,
    ref: row.ref,
    name: row.name,
    organizationId: row.organization_id,
    status: row.status,
    clusterId: row.cluster_id,
    poolSize: row.pool_size ?? DEFAULT_POOL_SIZE,
    isDefault: row.is_default,
    jwtSecret: open(row.jwt_secret, "platform.projects.jwt_secret"),
    legacyKeysIat: Number(row.legacy_keys_iat),
    legacyKeysEnabled: row.legacy_keys_enabled,
    adminUrl,
    dataUrl: withCredentials(
      adminUrl,
      projectAuthenticator(row.ref),
      open(row.authenticator_password, "platform.clusters.authenticator_password"),
    ),
    ownerRole: `postgres_${row.ref}`,
    sqlUrl: withCredentials(
      adminUrl,
      `strata_sql_${row.ref}`,
      open(row.sql_role_password, "platform.projects.sql_role_password"),
    ),
    readUrl: withCredentials(
      adminUrl,
      `strata_read_${row.ref}`,
      open(row.read_role_password, "platform.projects.read_role_password"),
    ),
    authUrl: withCredentials(
      adminUrl,
      `strata_auth_${row.ref}`,
      open(row.auth_role_password, "platform.projects.auth_role_password"),
    ),
    replicaPorts: row.replica_ports ?? [],
    rowVersion: row.row_version,
  };
}

/** Gives a project row the passwords of its SQL and auth roles the first time it is opened. */
async function withRolePasswords(pool: pg.Pool, kek: KeyEncryptionKey, row: any): Promise<any> {
  if (row.sql_role_password && row.read_role_password && row.auth_role_password) return row;
  const { rows } = await pool.query(
    `update platform.projects set sql_role_password = coalesce(sql_role_password, $2),
       read_role_password = coalesce(read_role_password, $3), auth_role_password = coalesce(auth_role_password, $4)
     where ref = $1
     returning sql_role_password, read_role_password, auth_role_password, xmin::text as row_version`,
    [
      row.ref,
      kek.seal(randomSecret(24), "platform.projects.sql_role_password"),
      kek.seal(randomSecret(24), "platform.projects.read_role_password"),
      kek.seal(randomSecret(24), "platform.projects.auth_role_password"),
    ],
  );
  return { ...row, ...rows[0] };
}

/**
 * Projects by ref, loaded from the control plane on first use. One process serves every project; each
 * project's runtime (pools, schema caches) is created lazily.
 */
export class ProjectRegistry {
  private readonly runtimes = new Map<string, Promise<ProjectRuntime | undefined>>();
  /** Replaced runtimes whose pools close after RETIRE_GRACE_MS (or at shutdown). */
  private readonly retiring = new Set<ProjectRuntime>();
  private listener: pg.Client | undefined;
  private closed = false;
  /** Custom hostnames and vanity subdomains that reach a project. */
  readonly hostnames: HostDirectory;

  constructor(
    /** Superuser pool on the control plane's database. */
    readonly platformPool: pg.Pool,
    readonly defaultRef: string,
    private readonly log: Logger,
    /** The bounds of a request on a project's pools. */
    private readonly poolLimits: PoolLimits = {},
    /** A project's runtime unused this long is retired (its pools and DDL watch closed); the default's never. */
    idleMs = 10 * 60_000,
  ) {
    this.hostnames = new HostDirectory(platformPool);
    this.sweeper = setInterval(() => this.retireIdle(idleMs), Math.min(idleMs, 60_000));
    this.sweeper.unref();
  }

  private readonly lastUsed = new Map<string, number>();
  private readonly sweeper: NodeJS.Timeout;

  /**
   * Retires the runtimes of projects nobody used for `idleMs`: each holds pools and a LISTEN connection, and
   * the cluster's connections are shared by every project. The next request opens the project again.
   */
  private retireIdle(idleMs: number): void {
    const now = Date.now();
    for (const ref of this.runtimes.keys()) {
      if (ref === this.defaultRef || now - (this.lastUsed.get(ref) ?? now) < idleMs) continue;
      this.lastUsed.delete(ref);
      this.retire(ref).catch(() => {});
    }
  }

  /** The runtime of `ref`, or undefined when no such project exists. */
  get(ref: string): Promise<ProjectRuntime | undefined> {
    this.lastUsed.set(ref, Date.now());
    let runtime = this.runtimes.get(ref);
    if (!runtime) {
      runtime = this.load(ref);
      this.runtimes.set(ref, runtime);
      runtime
        .then((r) => r === undefined && this.runtimes.delete(ref))
        .catch(() => this.runtimes.delete(ref));
    }
    return runtime;
  }

  /** The runtimes open now, without counting as a use (background checks must not keep projects open). */
  async open(): Promise<ProjectRuntime[]> {
    const all = await Promise.all([...this.runtimes.values()].map((r) => r.catch(() => undefined)));
    return all.filter((r): r is ProjectRuntime => r !== undefined);
  }

  async getDefault(): Promise<ProjectRuntime> {
    const runtime = await this.get(this.defaultRef);
    if (!runtime) throw new Error("the default project is missing from the control plane");
    return runtime;
  }

  /** Re-reads a project's row (status, secret, keys toggle) into its runtime, if loaded. */
  async refresh(ref: string): Promise<ProjectRuntime | undefined> {
    const loaded = this.runtimes.get(ref);
    if (!loaded) return this.get(ref);
    const runtime = await loaded;
    const row = (await this.platformPool.query(`${PROJECT_SELECT} where p.ref = $1`, [ref])).rows[0];
    if (!runtime) return undefined;
    if (!row) {
      await this.evict(ref);
      return undefined;
    }
    runtime.record = toRecord(row, kekOf(this.platformPool));
    return runtime;
  }

  /** Closes a project's pools and forgets its runtime (delete, pause, restart). */
  async evict(ref: string): Promise<void> {
    const runtime = await this.runtimes.get(ref)?.catch(() => undefined);
    this.runtimes.delete(ref);
    // A runtime retired a moment ago (the row's change notice may come first) closes now as well, so
    // that what it holds on the database (realtime's replication slot) is gone when evict returns.
    const retired = [...this.retiring].filter((r) => r.ref === ref && r !== runtime);
    for (const r of retired) this.retiring.delete(r);
    await Promise.all([runtime?.close(), ...retired.map((r) => r.close())]);
  }

  /**
   * Retires a project's runtime unless it was loaded from the row as it is now: a change notice can arrive
   * after this process already reloaded the project for that change (a restart retires at once), and must
   * not throw away the fresh runtime and its schema.
   */
  private async retireIfChanged(ref: string): Promise<void> {
    const runtime = await this.runtimes.get(ref)?.catch(() => undefined);
    if (!runtime) return;
    const { rows } = await this.platformPool.query(
      "select xmin::text as row_version from platform.projects where ref = $1",
      [ref],
    );
    if (rows[0]?.row_version === runtime.record.rowVersion) return;
    await this.retire(ref);
  }

  /** Forgets a project's runtime; requests already running on it finish before its pools close. */
  async retire(ref: string): Promise<void> {
    const runtime = await this.runtimes.get(ref)?.catch(() => undefined);
    this.runtimes.delete(ref);
    if (!runtime) return;
    runtime.stopWatching();
    this.retiring.add(runtime);
    setTimeout(() => {
      if (this.retiring.delete(runtime)) runtime.close().catch(() => {});
    }, RETIRE_GRACE_MS).unref();
  }

  /**
   * LISTENs for changes of project rows (sql/platform/100_management_control.sql), so that a pause, restore,
   * rename or delete made by any Strata process reaches this one: the project's runtime is retired and the
   * next request reloads it from its row. Also for changes of the served host names. Reconnects when the
   * connection is lost.
   */
  async watchControlPlane(adminUrl: string): Promise<void> {
    if (this.closed || this.listener) return;
    const client = new pg.Client({ connectionString: adminUrl });
    this.listener = client;
    const retry = () => {
      if (this.listener === client) this.listener = undefined;
      client.end().catch(() => {});
      if (!this.closed) setTimeout(() => this.watchControlPlane(adminUrl).catch(() => {}), 1000).unref();
    };
    client.on("error", retry);
    client.on("notification", (msg) => {
      if (msg.channel === "strata_hostnames_changed") this.hostnames.reload().catch(() => {});
      else if (msg.payload) this.retireIfChanged(msg.payload).catch(() => {});
    });
    try {
      await client.connect();
      await client.query("listen strata_project_changed");
      await client.query("listen strata_hostnames_changed");
      // Loaded after listening, so no change made in between is missed.
      await this.hostnames.reload();
    } catch {
      retry();
    }
  }

  async closeAll(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => {});
    const retiring = [...this.retiring];
    this.retiring.clear();
    await Promise.all([
      ...[...this.runtimes.keys()].map((ref) => this.evict(ref)),
      ...retiring.map((runtime) => runtime.close()),
    ]);
  }

  private async load(ref: string): Promise<ProjectRuntime | undefined> {
    const found = (await this.platformPool.query(`${PROJECT_SELECT} where p.ref = $1`, [ref])).rows[0];
    if (!found) return undefined;
    const kek = kekOf(this.platformPool);
    const row = await withRolePasswords(this.platformPool, kek, found);
    const runtime = new ProjectRuntime(toRecord(row, kek), this.log, this.platformPool, this.poolLimits);
    // A paused or provisioning database accepts no connections; its row's next change reloads the runtime.
    if (runtime.record.status === "ACTIVE_HEALTHY") {
      await this.prepareRow(row, kek);
      await runtime.watchSchema();
    }
    return runtime;
  }

  private async prepareRow(row: any, kek: KeyEncryptionKey): Promise<void> {
    await prepareProjectDatabase(toRecord(row, kek).adminUrl, {
      ref: row.ref,
      sqlPassword: kek.open(row.sql_role_password, "platform.projects.sql_role_password"),
      readPassword: kek.open(row.read_role_password, "platform.projects.read_role_password"),
      authenticatorPassword: kek.open(row.authenticator_password, "platform.clusters.authenticator_password"),
      authPassword: kek.open(row.auth_role_password, "platform.projects.auth_role_password"),
    });
  }

  /**
   * Brings a project's database and roles up to date whatever its status: provisioning does it before the
   * project is marked active, so its owner (the pooler's user) can log in from the first moment.
   */
  async prepare(ref: string): Promise<void> {
    const found = (await this.platformPool.query(`${PROJECT_SELECT} where p.ref = $1`, [ref])).rows[0];
    if (!found) return;
    const kek = kekOf(this.platformPool);
    await this.prepareRow(await withRolePasswords(this.platformPool, kek, found), kek);
  }
}
