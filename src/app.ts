import { createServer, type Server } from "node:http";
import path from "node:path";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { mintLegacyKey } from "./auth/legacyKeys";
import type { StrataConfig } from "./config";
import type { AppContext } from "./context";
import { applyBootstrap } from "./db/bootstrap";
import { allowLoopbackForLocalTesting } from "./net/outbound";
import { withAdminTransaction } from "./db/transaction";
import { enforceStatementDeadline } from "./db/statementDeadline";
import {
  attachKek,
  finishInterruptedRotation,
  isSealed,
  kekOf,
  loadKek,
  resealColumns,
  type KeyEncryptionKey,
} from "./platform/kek";
import { ensureLoginPassword } from "./db/loginRoles";
import type { ClusterLogRecord } from "./db/clusterLog";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "./db/embedded";
import { createLogger, type Logger } from "./log";
import { DEFAULT_CLUSTER_ID, ensureFirstStart } from "./platform/firstStart";
import { ClusterAccess } from "./projects/access";
import { PostgresLogReader } from "./logs/postgresLogs";
import { ProjectRegistry } from "./projects/registry";
import { UsageRecorder } from "./projects/usage";
import { LogRecorder } from "./logs/recorder";
import { DrainForwarder } from "./logs/drains";
import { stopFunctionRuntime } from "./functions/runtime";
import { reapOrphanWorkers } from "./functions/scratch";
import { backendOf } from "./storage/backend";
import { startStorageSweeper } from "./storage/sweep";
import { BackupService } from "./jobs/backups/service";
import { PhysicalBackups } from "./jobs/backups/physical";
import { ReplicaManager } from "./projects/replicas";
import type { OwnCluster } from "./db/physical";
import { ClusterDiskGuard, DiskWatch } from "./jobs/diskWatch";
import { settleReadOnly } from "./management/database-config/readonly";
import { EmbeddedClusters } from "./projects/embeddedClusters";
import { Upgrades } from "./jobs/upgrades";
import { WebhookDispatcher } from "./webhooks/dispatcher";
import { DatabaseModules } from "./jobs/modules/service";
import { openDataVaultSession } from "./modules/vault";
import { createApp, HttpDrain } from "./server";
import { resumeProvisioning } from "./management/projects/lifecycle";
import { deleteDueBranches } from "./management/branches/operations";
import { oneOffClient } from "./db/client";
import { ControlDatabaseError, prepareControlDatabase } from "./platform/controlDatabase";
import { claimDuty } from "./platform/duties";
import { openDbListener } from "./pooler/start";
import { openHttpsServer } from "./https";

export class StartupError extends Error {}

/** What a started server tells its operator (the banner, `strata keys --json`). */
export interface StrataInfo {
  api_url: string;
  graphql_url: string;
  rest_url: string;
  ref: string;
  anon_key: string;
  service_role_key: string;
  jwt_secret: string;
  management_token: string | undefined;
  db_url: string;
}

export interface RunningStrata {
  ctx: AppContext;
  info: StrataInfo;
  port: number;
  /** The HTTPS listener's port (STRATA_HTTPS_PORT), when it is on. */
  httpsPort?: number;
  stop(): Promise<void>;
}

const MIN_SERVER_VERSION = 140000;

/** What to do about a failed connection to DATABASE_URL, by the error's code. */
function fixOf(code: string | undefined): string {
  if (code === "28P01" || code === "28000") return "check the user and password in DATABASE_URL";
  if (code === "3D000") return "create that database or name an existing one in DATABASE_URL";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "check the host name in DATABASE_URL";
  return "is PostgreSQL running, and are the host and port in DATABASE_URL right?";
}

/** Connects to the main database once, failing with one clear line when it is unreachable or too old. */
async function checkDatabase(url: string): Promise<void> {
  const client = oneOffClient({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (e) {
    const { message, code } = e as { message: string; code?: string };
    throw new StartupError(`Cannot connect to the database at DATABASE_URL: ${message} (${fixOf(code)})`);
  }
  try {
    const { rows } = await client.query(
      "select current_setting('server_version_num')::int as v, current_setting('server_version') as s",
    );
    if (rows[0].v < MIN_SERVER_VERSION) {
      throw new StartupError(`PostgreSQL ${rows[0].s} is too old: Strata needs PostgreSQL 14 or newer`);
    }
  } finally {
    await client.end();
  }
}

/** Sets the password data requests log in with as `authenticator` (kept in platform.clusters). */
async function setAuthenticatorPassword(pool: pg.Pool, adminUrl: string): Promise<void> {
  const { rows } = await pool.query(
    "select authenticator_password from platform.clusters where id = 'local'",
  );
  const password = kekOf(pool).open(
    rows[0].authenticator_password,
    "platform.clusters.authenticator_password",
  );
  await ensureLoginPassword(adminUrl, "authenticator", password);
}

/**
 * The installation's key-encryption key, after finishing a rotation that was interrupted, and with every
 * secret still stored in plain text (an installation from before sealing) sealed by it.
 */
async function openKek(pool: pg.Pool, config: StrataConfig): Promise<KeyEncryptionKey> {
  const probe = await pool.query("select jwt_secret from platform.projects where is_default");
  if (!config.kek)
    finishInterruptedRotation(config.dataDir, probe.rows[0]?.jwt_secret, "platform.projects.jwt_secret");
  const kek = loadKek(config.dataDir, config.kek);
  const sealed = probe.rows[0]?.jwt_secret;
  if (sealed && isSealed(sealed)) {
    try {
      kek.open(sealed, "platform.projects.jwt_secret");
    } catch {
      throw new StartupError(
        "The key-encryption key does not open this installation's secrets: set STRATA_KEK (or restore the data directory's kek file) to the key they were sealed with.",
      );
    }
  }
  await withAdminTransaction(pool, async (client) => {
    await client.query("select pg_advisory_xact_lock(7305003)");
    await resealColumns(client, kek);
  });
  return kek;
}

/** Derives the banner's values for the default project. */
export async function describeDefaultProject(
  ctx: AppContext,
  managementToken: string | undefined,
): Promise<StrataInfo> {
  const project = await ctx.registry.getDefault();
  const { jwtSecret, legacyKeysIat, ref } = project.record;
  const apiUrl = `http://localhost:${ctx.config.port}`;
  return {
    api_url: apiUrl,
    graphql_url: `${apiUrl}/graphql/v1`,
    rest_url: `${apiUrl}/rest/v1`,
    ref,
    anon_key: await mintLegacyKey(jwtSecret, "anon", legacyKeysIat),
    service_role_key: await mintLegacyKey(jwtSecret, "service_role", legacyKeysIat),
    jwt_secret: jwtSecret,
    management_token: managementToken,
    db_url: ctx.adminUrl,
  };
}

/**
 * Prepares the main database (embedded when DATABASE_URL is unset) and the control plane's database beside
 * it: bootstrap SQL, first-start rows and the authenticator password. Shared by `start` and the CLI commands that only read.
 */
export async function prepareDatabase(
  config: StrataConfig,
  log: Logger,
  onPostgresLog: (record: ClusterLogRecord) => void = () => {},
) {
  let embedded: EmbeddedDatabase | undefined;
  let adminUrl = config.databaseUrl;
  if (!adminUrl) {
    embedded = await startEmbeddedPostgres(config.dataDir, config.embeddedPgPort, {
      onLog: (record) => {
        log.debug({ postgres: record.message, severity: record.error_severity }, "embedded postgres");
        onPostgresLog(record);
      },
      listenAddresses: config.embeddedPgListen,
      // Every start archives WAL (a CLI command's too: a gap would end point-in-time restores there).
      archiveDir: path.join(config.dataDir, "wal-archive"),
      onState: (state) =>
        state.running
          ? log.info("the embedded PostgreSQL runs again")
          : log.warn(
              { reason: state.reason, retry_in_ms: state.retryInMs },
              "the embedded PostgreSQL is down; restarting it",
            ),
    }).catch((e: Error) => {
      throw new StartupError(e.message, { cause: e });
    });
    adminUrl = embedded.url;
  }
  try {
    await checkDatabase(adminUrl);
    const applied = await applyBootstrap(adminUrl, ["project"]);
    if (applied.length) log.info({ applied }, "bootstrap applied");
    const controlUrl = await prepareControlDatabase(adminUrl).catch((e: Error) => {
      throw e instanceof ControlDatabaseError ? new StartupError(e.message, { cause: e }) : e;
    });
    // Data requests read the control plane too (opaque API keys): the same bounds as the data pools.
    const platformPool = new pg.Pool({
      connectionString: controlUrl,
      max: 5,
      connectionTimeoutMillis: config.poolWaitMs,
    });
    enforceStatementDeadline(platformPool, config.dataRequestTimeoutMs);
    platformPool.on("error", (e) => log.warn({ err: e.message }, "idle control-plane connection lost"));
    const kek = await openKek(platformPool, config);
    attachKek(platformPool, kek);
    const client = await platformPool.connect();
    let first;
    try {
      first = await ensureFirstStart(client, kek, {
        adminUrl,
        jwtSecret: config.jwtSecret,
        managementToken: config.managementToken,
        authenticatorPassword: config.authenticatorPassword,
        dataDir: config.dataDir,
      });
    } finally {
      client.release();
    }
    await setAuthenticatorPassword(platformPool, adminUrl);
    return { adminUrl, controlUrl, embedded, platformPool, ...first };
  } catch (e) {
    await embedded?.stop();
    throw e;
  }
}

/** The context's parts that come from a prepared database: the server's and the command line's alike. */
export function databaseContext(
  config: StrataConfig,
  log: Logger,
  db: Awaited<ReturnType<typeof prepareDatabase>>,
  registry: ProjectRegistry,
) {
  return {
    config,
    log,
    platformPool: db.platformPool,
    adminUrl: db.adminUrl,
    controlUrl: db.controlUrl,
    registry,
  };
}

/** The last steps of a stop (flushes, pools) get at least this long, even when the drain took the whole grace. */
const ENDING_MIN_MS = 2000;

/** Waits for `work` until `deadline` (a Date.now() value) at most; answers whether it settled by then. */
async function settledBy(deadline: number, work: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([
      work.then(
        () => true,
        () => true,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Starts the whole server: database, bootstrap, HTTP. */
export async function startStrata(
  config: StrataConfig,
  log: Logger = createLogger(config.logLevel),
): Promise<RunningStrata> {
  if (config.outboundLoopback) {
    allowLoopbackForLocalTesting();
    log.warn(
      "STRATA_OUTBOUND_LOOPBACK=allow: the URLs projects supply may reach this machine's loopback (a local test setup only)",
    );
  }
  // The embedded cluster's log is read for failed logins (network bans) once its access rules exist.
  let access: ClusterAccess | undefined;
  const db = await prepareDatabase(config, log, (record) => access?.observeLog(record));
  if (db.embedded)
    access = new ClusterAccess(
      db.platformPool,
      DEFAULT_CLUSTER_ID,
      db.adminUrl,
      db.embedded.databaseDir,
      log,
    );
  const registry = new ProjectRegistry(
    db.platformPool,
    db.defaultRef,
    log,
    {
      waitMs: config.poolWaitMs,
      statementMs: config.dataRequestTimeoutMs,
      prepareDataSession: (client, project) => openDataVaultSession(client, project, log),
    },
    config.projectIdleMs,
  );
  await registry.watchControlPlane(db.controlUrl);
  const usage = new UsageRecorder(db.platformPool, log);
  const logs = new LogRecorder(db.platformPool, log, config.logRetentionHours);
  // The log records of each cluster Strata runs become its projects' postgres_logs (a DATABASE_URL cluster's log
  // is not Strata's to read).
  const readPostgresLogs = (clusterAccess: ClusterAccess) => {
    const postgresLogs = new PostgresLogReader(db.platformPool, clusterAccess.clusterId, logs);
    clusterAccess.onRecord = (record) => postgresLogs.observe(record);
  };
  if (access) readPostgresLogs(access);
  const drains = new DrainForwarder(db.platformPool, kekOf(db.platformPool), log, () => logs.flush());
  const ctx: AppContext = {
    ...databaseContext(config, log, db, registry),
    usage,
    logs,
    storage: backendOf(config),
    access,
    restartCluster: db.embedded
      ? async () => {
          await db.embedded!.restart();
          await ctx.replicas?.restartAll();
        }
      : undefined,
    databaseDown: db.embedded && (() => db.embedded!.downReason()),
    ready: false,
  };
  if (db.embedded)
    ctx.clusterDisk = new ClusterDiskGuard(
      ctx,
      { id: DEFAULT_CLUSTER_ID, adminUrl: db.adminUrl, databaseDir: db.embedded.databaseDir },
      { warnBytes: config.diskWarnFreeBytes, refuseBytes: config.diskRefuseFreeBytes },
    );
  // Clusters of newer PostgreSQL majors that upgraded projects live on start with the main one.
  const embeddedClusters = db.embedded
    ? new EmbeddedClusters(db.platformPool, {
        dataDir: config.dataDir,
        listenAddresses: config.embeddedPgListen,
        port: config.upgradePgPort,
        mainClusterId: DEFAULT_CLUSTER_ID,
        log,
        prepareAccess: (clusterAccess) => {
          readPostgresLogs(clusterAccess);
          clusterAccess.startExpiry();
        },
      })
    : undefined;
  await embeddedClusters?.startRegistered();
  ctx.embeddedClusters = embeddedClusters;
  ctx.accessOf = (clusterId) => (access?.manages(clusterId) ? access : embeddedClusters?.accessOf(clusterId));
  const upgrades = new Upgrades(ctx);
  ctx.upgrades = upgrades;
  // Upgrades run only on the node that runs the embedded clusters: only it may take one as interrupted.
  if (embeddedClusters)
    await upgrades
      .start()
      .catch((e: Error) => log.error({ err: e.message }, "marking interrupted upgrades failed"));
  await access
    ?.apply()
    .catch((e: Error) => log.error({ err: e.message }, "writing the cluster's access rules failed"));
  access?.startExpiry();
  // Function workers and scratch directories a killed Strata left, before any worker of this one starts.
  const reaped = reapOrphanWorkers();
  if (reaped.killed || reaped.removed) log.info(reaped, "function workers of a previous run reaped");
  const { listener, serverOptions } = createApp(ctx);
  const http = new HttpDrain(listener);
  void resumeProvisioning(ctx);
  // Branches deleted with force=false go when their grace period ends (one node a minute looks).
  const deleteBranchesOnce = async () => {
    if (await claimDuty(db.platformPool, "delete-due-branches", 60_000)) await deleteDueBranches(ctx);
  };
  const branchSweeper = setInterval(() => void deleteBranchesOnce().catch(() => {}), 60_000);
  branchSweeper.unref();
  const webhooks = new WebhookDispatcher(ctx);
  ctx.webhooks = webhooks;
  webhooks.start();
  const modules = new DatabaseModules(ctx);
  modules.start();
  const own: OwnCluster | undefined = db.embedded
    ? {
        clusterId: DEFAULT_CLUSTER_ID,
        adminUrl: db.adminUrl,
        databaseDir: db.embedded.databaseDir,
        archiveDir: path.join(config.dataDir, "wal-archive"),
        dataDir: config.dataDir,
        listenAddresses: config.embeddedPgListen,
      }
    : undefined;
  const backups = new BackupService(
    ctx,
    config.backupRetentionDays,
    config.backupScheduleCheckMs,
    own && new PhysicalBackups(db.platformPool, own, config.backupRetentionDays, log),
  );
  ctx.backups = backups;
  await backups.start();
  // Read replicas start with the cluster they replicate.
  const replicas = own && new ReplicaManager(db.platformPool, own, log);
  ctx.replicas = replicas;
  if (access && replicas) access.onWritten = (pgHba) => replicas.syncAccess(pgHba);
  await replicas
    ?.startAll()
    .catch((e: Error) => log.error({ err: e.message }, "starting the read replicas failed"));
  const diskWatch = new DiskWatch(ctx, config.diskCheckMs, (project) => settleReadOnly(ctx, project));
  const server: Server = await new Promise((resolve, reject) => {
    const refuse = (e: Error) =>
      reject(
        new StartupError(`Cannot listen on port ${config.port}: ${e.message} (set PORT to a free port)`),
      );
    const s = createServer(serverOptions, http.listener);
    s.once("error", refuse);
    s.listen(config.port, () => resolve(s));
  });
  const httpsServer = await openHttpsServer(ctx, serverOptions, http.listener).catch((e: Error) => {
    server.close();
    throw new StartupError(
      `Cannot listen on port ${config.https.port}: ${e.message} (set STRATA_HTTPS_PORT to a free port)`,
    );
  });
  for (const s of [server, httpsServer]) if (s) ctx.realtime?.attach(s);
  void ctx.realtime?.checkWalLevel().catch(() => {});
  const dbListener = await openDbListener(ctx).catch((e: Error) => {
    server.close();
    httpsServer?.close();
    throw new StartupError(
      `Cannot start the database listener: ${e.message} (set STRATA_DB_PORT to a free port)`,
    );
  });
  const port = (server.address() as AddressInfo).port;
  const httpsPort = httpsServer && (httpsServer.address() as AddressInfo).port;
  ctx.config = { ...config, port };
  const info = await describeDefaultProject(ctx, db.managementToken);
  ctx.ready = true;
  // Upload files a crash left without a row, expired resumable uploads: in the background, then daily.
  const stopStorageSweeper = startStorageSweeper(ctx);

  /**
   * The one stop sequence, bounded by SHUTDOWN_GRACE_MS: stop accepting and drain the requests in flight
   * (realtime sockets get a close frame); stop the background loops, whose batch under way finishes or stays
   * claimed (its transaction rolls back) for another node; stop the function workers; write the last usage
   * and log records; end the pools; stop PostgreSQL with a fast shutdown. What still runs when the grace is
   * over is cut, and the last steps get at least ENDING_MIN_MS.
   */
  const shutdown = async () => {
    const deadline = Date.now() + config.shutdownGraceMs;
    const drained = Promise.all([server, httpsServer].map((s) => s && http.drain(s)));
    const dbListenerClosed = dbListener?.close();
    const realtimeClosed = ctx.realtime?.close();
    if (!(await settledBy(deadline, drained))) {
      log.warn("shutdown: requests still running at the end of the grace were cut");
      server.closeAllConnections();
      httpsServer?.closeAllConnections();
      ctx.realtime?.terminate();
    }
    clearInterval(branchSweeper);
    diskWatch.stop();
    access?.stopExpiry();
    drains.stop();
    const background = Promise.all([
      realtimeClosed,
      dbListenerClosed,
      stopStorageSweeper(),
      webhooks.stop(),
      modules.stop(),
      backups.stop(),
      upgrades.stop(),
    ]);
    if (!(await settledBy(deadline, background)))
      log.warn("shutdown: background work still running at the end of the grace was left to the next start");
    const ending = (async () => {
      await Promise.all([stopFunctionRuntime(ctx), usage.stop(), logs.stop(), ctx.storage?.close?.()]);
      await registry.closeAll();
      await db.platformPool.end();
    })();
    if (!(await settledBy(Math.max(deadline, Date.now() + ENDING_MIN_MS), ending)))
      log.warn("shutdown: connections still in use at the end of the grace were cut");
    await embeddedClusters?.stopAll();
    await replicas?.stopAll();
    // Fast shutdown (SIGINT): open transactions roll back and the backends' connections are closed.
    await db.embedded?.stop();
  };
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= shutdown());
  return { ctx, info, port, httpsPort, stop };
}
