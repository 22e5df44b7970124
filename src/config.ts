import { isIP } from "node:net";
import { statSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { checkCidr } from "./net/cidr";

/** The first part of `dir` (itself or a folder above it) that exists and is not a folder, if any. */
function blockingFile(dir: string): string | undefined {
  for (let p = dir; ; p = path.dirname(p)) {
    const stat = statSync(p, { throwIfNoEntry: false });
    if (stat) return stat.isDirectory() ? undefined : p;
    if (path.dirname(p) === p) return undefined;
  }
}

/** Everything the server reads from its environment (which overrides graphile.config.ts). */
export interface StrataConfig {
  /**
   * Whether the URLs projects supply (hooks, JWKS, OIDC, webhooks, drains, notify_url) may reach this
   * machine's loopback: for a local test setup only (`STRATA_OUTBOUND_LOOPBACK=allow`), warned at every start.
   */
  outboundLoopback: boolean;
  /** Superuser URL of the main database; undefined means "start the embedded PostgreSQL". */
  databaseUrl: string | undefined;
  port: number;
  /** Projects are also served at `<ref>.<domain>`. */
  domain: string;
  /** DNS servers (`ip` or `ip:port`) that check custom hostnames' records; the system's when empty. */
  dnsServers: string[];
  /** HS256 secret of the default project; generated and persisted when unset. */
  jwtSecret: string | undefined;
  /** Seeds the bootstrap admin's personal access token. */
  managementToken: string | undefined;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Where the embedded PostgreSQL keeps its data and the server its local state. */
  dataDir: string;
  /** Port of the embedded PostgreSQL. */
  embeddedPgPort: number;
  /** Port of the embedded cluster of a newer PostgreSQL major that upgraded projects move to (when made). */
  upgradePgPort: number;
  /** Addresses the embedded PostgreSQL listens on (`listen_addresses`). */
  embeddedPgListen: string;
  /**
   * The database listener (src/pooler): the PostgreSQL port where clients reach their project's database as
   * `postgres.<ref>` (or by the TLS name `db.<ref>.<domain>`), as the platform's pooler serves them.
   */
  dbListener: {
    /** STRATA_DB_PORT; undefined: off. Unset, 5432 with the embedded cluster, off with DATABASE_URL or NODE_ENV=test. */
    port: number | undefined;
    /** Whether the port was set: a port in use then stops the start (the default one is only warned about). */
    portSet: boolean;
    /** STRATA_DB_LISTEN, the address it listens on (loopback by default, as the embedded cluster). */
    listen: string;
    /** STRATA_DB_HOST, the host name connection strings give clients (default: `db.<domain>`, 127.0.0.1 for localhost). */
    host: string;
    /** STRATA_DB_TLS_CERT and STRATA_DB_TLS_KEY: PEM files; unset, a self-signed certificate of the data directory. */
    tlsCert: string | undefined;
    tlsKey: string | undefined;
  };
  /**
   * The optional HTTPS listener: the same app as `port`, for clients that reach a project at
   * `https://<ref>.<domain>` (the platform's CLI does).
   */
  https: {
    /** STRATA_HTTPS_PORT; undefined: off. */
    port: number | undefined;
    /** STRATA_TLS_CERT and STRATA_TLS_KEY: PEM files; unset, the database listener's certificate. */
    tlsCert: string | undefined;
    tlsKey: string | undefined;
  };
  /**
   * Password of the cluster-wide `authenticator` role; generated and kept in the control plane when unset.
   * Set it when several Strata installations share one cluster.
   */
  authenticatorPassword: string | undefined;
  /** How long a data request waits for a free database connection before it answers 503. */
  poolWaitMs: number;
  /**
   * How long a statement of a data request may go unanswered by the database (a hung or stopped server)
   * before the request answers 503: the statement is cancelled and its connection dropped.
   */
  dataRequestTimeoutMs: number;
  /** How long a stop waits for requests in flight and background work before it cuts them. */
  shutdownGraceMs: number;
  /**
   * Bounds on each GraphQL document (`GRAPHQL_MAX_TOKENS`, `_DEPTH`, `_ALIASES`, `_FIELDS`) and on its planning
   * (`GRAPHQL_MAX_PLANNING_MS`); only those set, over the preset's (plugins/PgGqlLimitsPlugin.ts).
   */
  graphqlLimits: {
    maxTokens?: number;
    maxDepth?: number;
    maxAliases?: number;
    maxFields?: number;
    planningMs?: number;
  };
  /** How long an unused project keeps its pools and DDL watch open. */
  projectIdleMs: number;
  /** How long the projects' log events are kept (hours). */
  logRetentionHours: number;
  /** The key-encryption key (`STRATA_KEK`); unset: the data directory's key file. */
  kek: string | undefined;
  /** How long a signing key must have been revoked before it may be deleted (tokens it signed expire). */
  signingKeyDeleteAfterSeconds: number;
  /** Management API requests per minute per identity and project/organization scope (spec: 120). */
  managementRateLimit: number;
  /**
   * Addresses and CIDRs of the proxies in front of this node (`STRATA_TRUSTED_PROXIES`): a request from one
   * of them is from the right-most address of its `X-Forwarded-For` that is not one of them. Empty: the
   * header is never read.
   */
  trustedProxies: string[];
  /** Where people reach this installation: the links mailed to its users (invitations) start with it. */
  publicUrl: string;
  /**
   * The operator's SMTP server for the installation's own mail (invitations to organizations), as
   * `smtp://user:pass@host:port` (`smtps://` for TLS from the start); unset: invitation links are answered
   * to the inviter instead. `sender` is the From address.
   */
  smtp: { url: string | undefined; sender: string };
  /**
   * A realtime node (a Strata process serving a project's sockets) whose heartbeat is older than this is
   * taken for dead by the others: its presences are removed and left. It beats every third of it.
   */
  realtimeNodeTimeoutMs: number;
  /** Backups of a project are kept this many days (the newest one always). */
  backupRetentionDays: number;
  /** How often each node looks for a project whose scheduled backup is due. */
  backupScheduleCheckMs: number;
  /** Disk each project database may use at most, whatever its disk config says (unset: no such quota). */
  projectDiskQuotaBytes: number | undefined;
  /** How often each node measures the open projects' disk usage (read-only mode past the threshold). */
  diskCheckMs: number;
  /**
   * Free space of the embedded cluster's volume below which a warning is logged, and above which refused
   * writes are allowed again.
   */
  diskWarnFreeBytes: number;
  /** Free space of the embedded cluster's volume below which every project's writes are refused. */
  diskRefuseFreeBytes: number;
  /** Where storage keeps object bytes: the data directory's `storage/` unless an S3 bucket is named. */
  storage: {
    s3Bucket: string | undefined;
    s3Endpoint: string | undefined;
    s3Region: string;
    s3AccessKeyId: string | undefined;
    s3SecretAccessKey: string | undefined;
    s3ForcePathStyle: boolean;
  };
  /**
   * Base URLs of the SMS providers' APIs (`STRATA_SMS_<PROVIDER>_URL`), for a proxy or a local receiver;
   * unset: the provider's public API.
   */
  smsProviderUrls: Partial<
    Record<"twilio" | "twilio_verify" | "messagebird" | "textlocal" | "vonage", string>
  >;
  /** siteverify URL of each CAPTCHA provider (a proxy or a local receiver); unset: the provider's own. */
  captchaUrls: Partial<Record<"hcaptcha" | "turnstile", string>>;
  /**
   * Base URL of an external sign-in provider that has no URL slot in the auth config
   * (`STRATA_AUTH_PROVIDER_BASE_<PROVIDER>`, e.g. `..._GITHUB` for GitHub Enterprise, a proxy or a local
   * provider), by provider name in lower case: every host of the provider, and its ID token issuer, is then
   * this URL. Unset: the provider's public hosts.
   */
  authProviderBases: Record<string, string>;
  /** Limits of edge function workers. */
  functions: {
    /** Continuous CPU time a worker may spend without answering before it is stopped (546). */
    cpuMs: number;
    /** Wall-clock time of one invocation. */
    wallMs: number;
    memoryMb: number;
    /** Warm workers kept at most, and how long an idle one is kept. */
    maxWorkers: number;
    idleMs: number;
  };
}

export class ConfigError extends Error {}

/** The database listener's port unless set otherwise: PostgreSQL's, which the CLI connects to. */
const DEFAULT_DB_PORT = 5432;
/** Test runs (jest sets NODE_ENV=test) start many servers at once: the listener is off there unless asked for. */
const defaultDbPort = (databaseUrl: string | undefined) =>
  databaseUrl === undefined && process.env.NODE_ENV !== "test" ? DEFAULT_DB_PORT : undefined;

const port = (name: string) =>
  z.coerce
    .number({ error: `${name} must be a port number (1-65535)` })
    .int(`${name} must be a port number (1-65535)`)
    .min(0, `${name} must be a port number (1-65535)`)
    .max(65535, `${name} must be a port number (1-65535)`);

const positiveInt = (name: string) =>
  z.coerce
    .number({ error: `${name} must be a positive whole number` })
    .int(`${name} must be a positive whole number`)
    .positive(`${name} must be a positive whole number`);

const smsUrl = (name: string) =>
  z
    .url({ protocol: /^https?$/, error: `${name} must be an http(s) URL such as http://127.0.0.1:8080` })
    .optional();

const schema = z.object({
  DATABASE_URL: z
    .string()
    .refine((v) => /^postgres(ql)?:\/\//.test(v), "DATABASE_URL must be a postgres:// connection URL")
    .optional(),
  PORT: port("PORT").default(54321),
  STRATA_DOMAIN: z
    .string()
    .regex(/^[a-z0-9.-]+$/i, "STRATA_DOMAIN must be a host name such as localhost")
    .default("localhost"),
  STRATA_DNS_SERVERS: z
    .string()
    .regex(
      /^\s*[0-9a-f.:[\]]+(\s*,\s*[0-9a-f.:[\]]+)*\s*$/i,
      "STRATA_DNS_SERVERS must be a comma-separated list of IP addresses (ip or ip:port)",
    )
    .optional(),
  JWT_SECRET: z.string().min(32, "JWT_SECRET must be at least 32 characters long").optional(),
  MANAGEMENT_TOKEN: z.string().min(16, "MANAGEMENT_TOKEN must be at least 16 characters long").optional(),
  LOG_LEVEL: z
    .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
      error: "LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent",
    })
    .default("info"),
  STRATA_DATA_DIR: z
    .string()
    .default(".strata")
    .superRefine((v, ctx) => {
      const file = blockingFile(path.resolve(v));
      if (file)
        ctx.addIssue({
          code: "custom",
          message: `STRATA_DATA_DIR must name a directory or where one can be made, but ${file} is a file: point it at a directory`,
        });
    }),
  STRATA_PG_PORT: port("STRATA_PG_PORT").default(54322),
  STRATA_PG_UPGRADE_PORT: port("STRATA_PG_UPGRADE_PORT").optional(),
  STRATA_PG_LISTEN: z
    .string()
    .refine(
      (v) => v.split(",").every((a) => a.trim() === "*" || isIP(a.trim()) !== 0),
      "STRATA_PG_LISTEN must be a comma-separated list of IP addresses (or *)",
    )
    .default("127.0.0.1"),
  STRATA_DB_PORT: z.union([z.literal("off"), port("STRATA_DB_PORT")]).optional(),
  STRATA_DB_LISTEN: z
    .string()
    .refine((v) => isIP(v) !== 0, "STRATA_DB_LISTEN must be one IP address (0.0.0.0 or :: for all)")
    .default("127.0.0.1"),
  STRATA_DB_HOST: z
    .string()
    .regex(/^[a-z0-9.:-]+$/i, "STRATA_DB_HOST must be a host name or an IP address")
    .optional(),
  STRATA_DB_TLS_CERT: z.string().optional(),
  STRATA_DB_TLS_KEY: z.string().optional(),
  STRATA_HTTPS_PORT: port("STRATA_HTTPS_PORT").optional(),
  STRATA_TLS_CERT: z.string().optional(),
  STRATA_TLS_KEY: z.string().optional(),
  DATA_POOL_WAIT_MS: positiveInt("DATA_POOL_WAIT_MS").default(10_000),
  DATA_REQUEST_TIMEOUT_MS: positiveInt("DATA_REQUEST_TIMEOUT_MS").default(30_000),
  SHUTDOWN_GRACE_MS: positiveInt("SHUTDOWN_GRACE_MS").default(10_000),
  GRAPHQL_MAX_TOKENS: positiveInt("GRAPHQL_MAX_TOKENS").optional(),
  GRAPHQL_MAX_DEPTH: positiveInt("GRAPHQL_MAX_DEPTH").optional(),
  GRAPHQL_MAX_ALIASES: positiveInt("GRAPHQL_MAX_ALIASES").optional(),
  GRAPHQL_MAX_FIELDS: positiveInt("GRAPHQL_MAX_FIELDS").optional(),
  GRAPHQL_MAX_PLANNING_MS: positiveInt("GRAPHQL_MAX_PLANNING_MS").optional(),
  STRATA_OUTBOUND_LOOPBACK: z
    .enum(["deny", "allow"], { error: "STRATA_OUTBOUND_LOOPBACK must be deny or allow" })
    .default("deny"),
  PROJECT_IDLE_MS: positiveInt("PROJECT_IDLE_MS").default(600_000),
  LOG_RETENTION_HOURS: positiveInt("LOG_RETENTION_HOURS").default(72),
  STRATA_KEK: z.string().min(32, "STRATA_KEK must be at least 32 characters long").optional(),
  AUTHENTICATOR_PASSWORD: z
    .string()
    .min(12, "AUTHENTICATOR_PASSWORD must be at least 12 characters long")
    .optional(),
  SIGNING_KEY_DELETE_AFTER_SECONDS: z.coerce
    .number({ error: "SIGNING_KEY_DELETE_AFTER_SECONDS must be a number of seconds" })
    .int()
    .min(0)
    .default(3600),
  BACKUP_RETENTION_DAYS: z.coerce
    .number({ error: "BACKUP_RETENTION_DAYS must be a positive whole number of days" })
    .int("BACKUP_RETENTION_DAYS must be a positive whole number of days")
    .positive("BACKUP_RETENTION_DAYS must be a positive whole number of days")
    .default(7),
  BACKUP_SCHEDULE_CHECK_MS: z.coerce
    .number({ error: "BACKUP_SCHEDULE_CHECK_MS must be a positive whole number of milliseconds" })
    .int("BACKUP_SCHEDULE_CHECK_MS must be a positive whole number of milliseconds")
    .positive("BACKUP_SCHEDULE_CHECK_MS must be a positive whole number of milliseconds")
    .default(30_000),
  PROJECT_DISK_QUOTA_MB: z.coerce
    .number({ error: "PROJECT_DISK_QUOTA_MB must be a positive number of megabytes" })
    .positive("PROJECT_DISK_QUOTA_MB must be a positive number of megabytes")
    .optional(),
  DISK_CHECK_MS: z.coerce
    .number({ error: "DISK_CHECK_MS must be a positive whole number of milliseconds" })
    .int("DISK_CHECK_MS must be a positive whole number of milliseconds")
    .positive("DISK_CHECK_MS must be a positive whole number of milliseconds")
    .default(60_000),
  DISK_WARN_FREE_MB: positiveInt("DISK_WARN_FREE_MB").default(1024),
  DISK_REFUSE_FREE_MB: positiveInt("DISK_REFUSE_FREE_MB").default(256),
  MANAGEMENT_RATE_LIMIT: z.coerce
    .number({ error: "MANAGEMENT_RATE_LIMIT must be a positive whole number of requests per minute" })
    .int("MANAGEMENT_RATE_LIMIT must be a positive whole number of requests per minute")
    .positive("MANAGEMENT_RATE_LIMIT must be a positive whole number of requests per minute")
    .default(120),
  STRATA_TRUSTED_PROXIES: z
    .string()
    .default("")
    .transform((value, zctx) => {
      const entries = value
        .split(",")
        .map((entry) => entry.trim())
        .filter(Boolean);
      for (const entry of entries) {
        const family = isIP(entry.split("/")[0]);
        if (family === 0 || checkCidr(entry, family as 4 | 6)) {
          zctx.addIssue({
            code: "custom",
            message: `STRATA_TRUSTED_PROXIES must list addresses or CIDRs separated by commas (such as 10.0.0.0/8,127.0.0.1): "${entry}" is neither`,
          });
          return z.NEVER;
        }
      }
      return entries;
    }),
  STRATA_PUBLIC_URL: z
    .url({
      protocol: /^https?$/,
      error: "STRATA_PUBLIC_URL must be an http(s) URL such as https://strata.example.com",
    })
    .optional(),
  STRATA_SMTP_URL: z
    .url({
      protocol: /^smtps?$/,
      error:
        "STRATA_SMTP_URL must be an smtp:// or smtps:// URL such as smtp://user:pass@mail.example.com:587",
    })
    .optional(),
  STRATA_SMTP_SENDER: z.string().min(3).optional(),
  REALTIME_NODE_TIMEOUT_MS: positiveInt("REALTIME_NODE_TIMEOUT_MS").default(15_000),
  STORAGE_S3_BUCKET: z.string().optional(),
  STORAGE_S3_ENDPOINT: z
    .url({ error: "STORAGE_S3_ENDPOINT must be a URL such as http://127.0.0.1:9000" })
    .optional(),
  STORAGE_S3_REGION: z.string().default("us-east-1"),
  STORAGE_S3_ACCESS_KEY_ID: z.string().optional(),
  STORAGE_S3_SECRET_ACCESS_KEY: z.string().optional(),
  STORAGE_S3_FORCE_PATH_STYLE: z
    .enum(["true", "false"], { error: "STORAGE_S3_FORCE_PATH_STYLE must be true or false" })
    .default("true"),
  STRATA_SMS_TWILIO_URL: smsUrl("STRATA_SMS_TWILIO_URL"),
  STRATA_SMS_TWILIO_VERIFY_URL: smsUrl("STRATA_SMS_TWILIO_VERIFY_URL"),
  STRATA_SMS_MESSAGEBIRD_URL: smsUrl("STRATA_SMS_MESSAGEBIRD_URL"),
  STRATA_SMS_TEXTLOCAL_URL: smsUrl("STRATA_SMS_TEXTLOCAL_URL"),
  STRATA_SMS_VONAGE_URL: smsUrl("STRATA_SMS_VONAGE_URL"),
  STRATA_CAPTCHA_HCAPTCHA_URL: smsUrl("STRATA_CAPTCHA_HCAPTCHA_URL"),
  STRATA_CAPTCHA_TURNSTILE_URL: smsUrl("STRATA_CAPTCHA_TURNSTILE_URL"),
  FUNCTIONS_CPU_MS: positiveInt("FUNCTIONS_CPU_MS").default(2000),
  FUNCTIONS_WALL_MS: positiveInt("FUNCTIONS_WALL_MS").default(150_000),
  FUNCTIONS_MEMORY_MB: positiveInt("FUNCTIONS_MEMORY_MB").default(256),
  FUNCTIONS_MAX_WORKERS: positiveInt("FUNCTIONS_MAX_WORKERS").default(32),
  FUNCTIONS_IDLE_MS: positiveInt("FUNCTIONS_IDLE_MS").default(60_000),
});

const AUTH_PROVIDER_BASE = /^STRATA_AUTH_PROVIDER_BASE_([A-Z0-9_]+)$/;

/** The STRATA_AUTH_PROVIDER_BASE_<PROVIDER> variables that are set, by provider name; each an http(s) URL. */
function authProviderBases(env: NodeJS.ProcessEnv): Record<string, string> {
  const bases: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    const m = AUTH_PROVIDER_BASE.exec(key);
    if (!m || !value) continue;
    if (!/^https?:\/\//.test(value) || !URL.canParse(value)) {
      throw new ConfigError(
        `Invalid configuration: ${key} must be an http(s) URL (got ${JSON.stringify(value)})`,
      );
    }
    bases[m[1].toLowerCase()] = value.replace(/\/+$/, "");
  }
  return bases;
}

/** The entries of `values` that are set. */
function definedOnly<T extends object>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Reads the configuration; `overrides` come from graphile.config.ts and lose against the environment. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Partial<Record<keyof z.input<typeof schema>, string | number>> = {},
): StrataConfig {
  const merged: Record<string, unknown> = { ...overrides };
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== "") merged[key] = value;
  }
  const parsed = schema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(
      `Invalid configuration: ${issue.message} (got ${JSON.stringify(merged[String(issue.path[0])])})`,
    );
  }
  const c = parsed.data;
  if ((c.STRATA_DB_TLS_CERT === undefined) !== (c.STRATA_DB_TLS_KEY === undefined))
    throw new ConfigError(
      "Invalid configuration: set both STRATA_DB_TLS_CERT and STRATA_DB_TLS_KEY, or neither",
    );
  if ((c.STRATA_TLS_CERT === undefined) !== (c.STRATA_TLS_KEY === undefined))
    throw new ConfigError("Invalid configuration: set both STRATA_TLS_CERT and STRATA_TLS_KEY, or neither");
  if (c.DISK_WARN_FREE_MB <= c.DISK_REFUSE_FREE_MB)
    throw new ConfigError(
      `Invalid configuration: DISK_WARN_FREE_MB must be more than DISK_REFUSE_FREE_MB (got ${c.DISK_WARN_FREE_MB} and ${c.DISK_REFUSE_FREE_MB})`,
    );
  return {
    databaseUrl: c.DATABASE_URL,
    port: c.PORT,
    domain: c.STRATA_DOMAIN.toLowerCase(),
    dnsServers: (c.STRATA_DNS_SERVERS ?? "")
      .split(",")
      .map((v) => v.trim())
      .filter(Boolean),
    jwtSecret: c.JWT_SECRET,
    managementToken: c.MANAGEMENT_TOKEN,
    logLevel: c.LOG_LEVEL,
    dataDir: path.resolve(c.STRATA_DATA_DIR),
    embeddedPgPort: c.STRATA_PG_PORT,
    upgradePgPort: c.STRATA_PG_UPGRADE_PORT ?? c.STRATA_PG_PORT + 1,
    embeddedPgListen: c.STRATA_PG_LISTEN.split(",")
      .map((a) => a.trim())
      .join(","),
    dbListener: {
      port: c.STRATA_DB_PORT === "off" ? undefined : (c.STRATA_DB_PORT ?? defaultDbPort(c.DATABASE_URL)),
      portSet: c.STRATA_DB_PORT !== undefined,
      listen: c.STRATA_DB_LISTEN,
      host:
        c.STRATA_DB_HOST ??
        (c.STRATA_DOMAIN.toLowerCase() === "localhost" ? "127.0.0.1" : `db.${c.STRATA_DOMAIN.toLowerCase()}`),
      tlsCert: c.STRATA_DB_TLS_CERT,
      tlsKey: c.STRATA_DB_TLS_KEY,
    },
    https: { port: c.STRATA_HTTPS_PORT, tlsCert: c.STRATA_TLS_CERT, tlsKey: c.STRATA_TLS_KEY },
    authenticatorPassword: c.AUTHENTICATOR_PASSWORD,
    kek: c.STRATA_KEK,
    poolWaitMs: c.DATA_POOL_WAIT_MS,
    dataRequestTimeoutMs: c.DATA_REQUEST_TIMEOUT_MS,
    shutdownGraceMs: c.SHUTDOWN_GRACE_MS,
    graphqlLimits: definedOnly({
      maxTokens: c.GRAPHQL_MAX_TOKENS,
      maxDepth: c.GRAPHQL_MAX_DEPTH,
      maxAliases: c.GRAPHQL_MAX_ALIASES,
      maxFields: c.GRAPHQL_MAX_FIELDS,
      planningMs: c.GRAPHQL_MAX_PLANNING_MS,
    }),
    outboundLoopback: c.STRATA_OUTBOUND_LOOPBACK === "allow",
    projectIdleMs: c.PROJECT_IDLE_MS,
    logRetentionHours: c.LOG_RETENTION_HOURS,
    signingKeyDeleteAfterSeconds: c.SIGNING_KEY_DELETE_AFTER_SECONDS,
    managementRateLimit: c.MANAGEMENT_RATE_LIMIT,
    trustedProxies: c.STRATA_TRUSTED_PROXIES,
    publicUrl: (c.STRATA_PUBLIC_URL ?? `http://${c.STRATA_DOMAIN.toLowerCase()}:${c.PORT}`).replace(
      /\/+$/,
      "",
    ),
    smtp: {
      url: c.STRATA_SMTP_URL,
      sender: c.STRATA_SMTP_SENDER ?? `noreply@${c.STRATA_DOMAIN.toLowerCase()}`,
    },
    realtimeNodeTimeoutMs: c.REALTIME_NODE_TIMEOUT_MS,
    backupRetentionDays: c.BACKUP_RETENTION_DAYS,
    backupScheduleCheckMs: c.BACKUP_SCHEDULE_CHECK_MS,
    projectDiskQuotaBytes:
      c.PROJECT_DISK_QUOTA_MB === undefined ? undefined : Math.floor(c.PROJECT_DISK_QUOTA_MB * 1024 * 1024),
    diskCheckMs: c.DISK_CHECK_MS,
    diskWarnFreeBytes: c.DISK_WARN_FREE_MB * 1024 * 1024,
    diskRefuseFreeBytes: c.DISK_REFUSE_FREE_MB * 1024 * 1024,
    storage: {
      s3Bucket: c.STORAGE_S3_BUCKET,
      s3Endpoint: c.STORAGE_S3_ENDPOINT,
      s3Region: c.STORAGE_S3_REGION,
      s3AccessKeyId: c.STORAGE_S3_ACCESS_KEY_ID,
      s3SecretAccessKey: c.STORAGE_S3_SECRET_ACCESS_KEY,
      s3ForcePathStyle: c.STORAGE_S3_FORCE_PATH_STYLE === "true",
    },
    smsProviderUrls: {
      twilio: c.STRATA_SMS_TWILIO_URL,
      twilio_verify: c.STRATA_SMS_TWILIO_VERIFY_URL,
      messagebird: c.STRATA_SMS_MESSAGEBIRD_URL,
      textlocal: c.STRATA_SMS_TEXTLOCAL_URL,
      vonage: c.STRATA_SMS_VONAGE_URL,
    },
    captchaUrls: {
      hcaptcha: c.STRATA_CAPTCHA_HCAPTCHA_URL,
      turnstile: c.STRATA_CAPTCHA_TURNSTILE_URL,
    },
    authProviderBases: authProviderBases(env),
    functions: {
      cpuMs: c.FUNCTIONS_CPU_MS,
      wallMs: c.FUNCTIONS_WALL_MS,
      memoryMb: c.FUNCTIONS_MEMORY_MB,
      maxWorkers: c.FUNCTIONS_MAX_WORKERS,
      idleMs: c.FUNCTIONS_IDLE_MS,
    },
  };
}
