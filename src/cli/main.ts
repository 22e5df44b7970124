// First: sets the production mode before the libraries below read it.
import "./productionMode";
import v8 from "node:v8";
import {
  databaseContext,
  describeDefaultProject,
  prepareDatabase,
  startStrata,
  StartupError,
  type StrataInfo,
} from "../app";
import { ConfigError, loadConfig, type StrataConfig } from "../config";
import { createLogger, maskDatabaseUrl } from "../log";
import { ProjectRegistry } from "../projects/registry";
import { bootstrapAdminId, createAccessToken, TokenError } from "../management/tokens";
import { setPassword } from "../management/account/users";
import { HttpError } from "../management/http";
import { isPlan, PLANS, setOrganizationPlan } from "../management/billing/plans";
import graphileConfig from "../../graphile.config";
import { withAdminTransaction } from "../db/transaction";
import { commitKeyFile, kekOf, loadKek, prepareNextKey, resealColumns } from "../platform/kek";
import { oneOffClient } from "../db/client";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { PASSWORD_FILE } from "../db/embedded";

function configFromEnvironment(): StrataConfig {
  const strata = (graphileConfig as { strata?: { port?: number; domain?: string } }).strata ?? {};
  return loadConfig(process.env, {
    ...(strata.port !== undefined ? { PORT: strata.port } : {}),
    ...(strata.domain !== undefined ? { STRATA_DOMAIN: strata.domain } : {}),
  });
}

function banner(info: StrataInfo): string {
  return [
    "",
    "Strata is running.",
    "",
    `         API URL: ${info.api_url}`,
    `     GraphQL URL: ${info.graphql_url}`,
    `        REST URL: ${info.rest_url}`,
    `  Management API: ${info.api_url}/v1`,
    `          Studio: ${info.api_url}/projects (sign in with a management token)`,
    `     Project ref: ${info.ref}`,
    `        anon key: ${info.anon_key}`,
    `service_role key: ${info.service_role_key}`,
    `Management token: ${info.management_token ?? "(stored hashed; set MANAGEMENT_TOKEN or create one with `npm run strata -- token create`)"}`,
    `          DB URL: ${maskDatabaseUrl(info.db_url)}`,
    "",
  ].join("\n");
}

/**
 * V8 lets the old generation grow to up to 4 × what survived its last full collection; under load that is
 * a few hundred MB of garbage held between collections. 1.5 × keeps the server's memory near its live data
 * (RSS after the reference benchmark about 225 MB instead of about 360, throughput the same within the
 * benchmark's noise). A value given on the command line or in NODE_OPTIONS wins.
 */
function boundHeapGrowth(): void {
  const flag = "--heap-growing-percent";
  if (process.execArgv.some((a) => a.startsWith(flag)) || process.env.NODE_OPTIONS?.includes(flag)) return;
  v8.setFlagsFromString(`${flag}=50`);
}

async function start(): Promise<void> {
  boundHeapGrowth();
  const config = configFromEnvironment();
  const log = createLogger(config.logLevel);
  // A stray error of a background task is logged (message only: no request, key or URL), not a crash that
  // takes every project down.
  process.on("unhandledRejection", (e) =>
    log.error({ err: (e as Error)?.message ?? String(e) }, "unhandled rejection"),
  );
  process.on("uncaughtException", (e) => log.error({ err: e.message }, "uncaught exception"));
  // Signals are taken from the first moment: one that comes while Strata still starts stops it once it has
  // started (never Node's default exit, which would leave the database running); a second one forces.
  const starting = startStrata(config, log);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      log.warn({ signal }, "second signal: exiting without waiting");
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, "shutting down");
    starting
      .then((strata) => strata.stop())
      .then(
        () => process.exit(0),
        (e) => {
          log.error({ err: e }, "shutdown failed");
          process.exit(1);
        },
      );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  const strata = await starting;
  process.stdout.write(banner(strata.info) + "\n");
}

/** Runs `work` against the database: the running server's embedded one when reachable, else its own. */
async function withDatabase<T>(
  work: (ctx: Parameters<typeof describeDefaultProject>[0], token: string | undefined) => Promise<T>,
): Promise<T> {
  const config = configFromEnvironment();
  const log = createLogger("silent");
  if (!config.databaseUrl) {
    // The running server's cluster, with the superuser password it was given at its first start.
    const passwordFile = path.join(config.dataDir, PASSWORD_FILE);
    const password = existsSync(passwordFile) ? readFileSync(passwordFile, "utf8").trim() : "postgres";
    const running = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${config.embeddedPgPort}/postgres`;
    const probe = oneOffClient({ connectionString: running, connectionTimeoutMillis: 1000 });
    const reachable = await probe.connect().then(
      () => true,
      () => false,
    );
    await probe.end().catch(() => {});
    if (reachable) config.databaseUrl = running;
  }
  const db = await prepareDatabase(config, log);
  const registry = new ProjectRegistry(db.platformPool, db.defaultRef, log);
  try {
    return await work(databaseContext(config, log, db, registry), db.managementToken);
  } finally {
    await registry.closeAll();
    await db.platformPool.end();
    await db.embedded?.stop();
  }
}

async function keys(json: boolean): Promise<void> {
  const info = await withDatabase((ctx, token) => describeDefaultProject(ctx, token));
  process.stdout.write(json ? JSON.stringify(info, null, 2) + "\n" : banner(info) + "\n");
}

/** Value of `--flag value` or `--flag=value`. */
function option(args: string[], flag: string): string | undefined {
  const i = args.findIndex((a) => a === flag || a.startsWith(flag + "="));
  if (i === -1) return undefined;
  return args[i].includes("=") ? args[i].slice(flag.length + 1) : args[i + 1];
}

async function token(args: string[]): Promise<void> {
  if (args[0] !== "create") throw new TokenError(USAGE);
  const permissions = option(args.slice(1), "--permissions")
    ?.split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  const name = option(args.slice(1), "--name") ?? (permissions ? "fine-grained" : "personal");
  const created = await withDatabase(async (ctx) => {
    const made = await createAccessToken(ctx.platformPool, await bootstrapAdminId(ctx.platformPool), {
      name,
      permissions,
    });
    return { token: made.token, permissions: made.row.permissions };
  });
  process.stdout.write(
    args.includes("--json") ? JSON.stringify(created, null, 2) + "\n" : created.token + "\n",
  );
}

class UserError extends Error {}

/** The first line of standard input (a password: never an argument, which other users of the machine see). */
async function firstLineOfInput(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write("Password: ");
  let text = "";
  for await (const chunk of process.stdin) {
    text += chunk;
    if (text.includes("\n")) break;
  }
  return text.split(/\r?\n/)[0];
}

/**
 * `user password <email>`: sets the password a user of the installation signs in with (e.g. the bootstrap
 * admin, admin@strata.local, who has none) from standard input, and ends the user's sessions.
 */
async function userPassword(args: string[]): Promise<void> {
  const [sub, email] = args;
  if (sub !== "password" || !email) throw new UserError(USAGE);
  const password = await firstLineOfInput();
  const set = await withDatabase((ctx) => setPassword(ctx.platformPool, email, password));
  if (!set) throw new UserError(`No user ${email}`);
  process.stdout.write(`Password of ${email} set.\n`);
}

class KekError extends Error {}

class PlanError extends Error {}

/**
 * `org plan <slug> [plan]`: prints or sets an organization's plan. Strata bills nothing, so the plan is the
 * operator's to give; running servers read it on every request.
 */
async function organizationPlan(args: string[]): Promise<void> {
  const [sub, slug, plan] = args;
  if (sub !== "plan" || !slug) throw new PlanError(USAGE);
  if (plan !== undefined && !isPlan(plan))
    throw new PlanError(`Unknown plan ${plan}: one of ${PLANS.join(", ")}`);
  const answer = await withDatabase(async (ctx) => {
    if (plan !== undefined && !(await setOrganizationPlan(ctx.platformPool, slug, plan))) return undefined;
    const { rows } = await ctx.platformPool.query("select plan from platform.organizations where slug = $1", [
      slug,
    ]);
    return rows[0]?.plan as string | undefined;
  });
  if (answer === undefined) throw new PlanError(`No organization ${slug}`);
  process.stdout.write(`${slug}: ${answer}\n`);
}

/**
 * Re-seals every stored secret under a new key-encryption key in one transaction. With the key file: the new
 * key is written next to the old one first and takes its place once the database committed (a start after
 * an interruption finishes the switch). With STRATA_KEK: STRATA_NEW_KEK is the new key, to be set as
 * STRATA_KEK on every node. Running servers keep the old key in memory: restart them afterwards.
 */
async function rotateKek(): Promise<void> {
  const config = configFromEnvironment();
  const newFromEnv = process.env.STRATA_NEW_KEK;
  if (config.kek && (!newFromEnv || newFromEnv.length < 32))
    throw new KekError("STRATA_KEK is set: give the new key (32+ characters) as STRATA_NEW_KEK");
  await withDatabase(async (ctx) => {
    const from = kekOf(ctx.platformPool);
    const to = config.kek ? loadKek(config.dataDir, newFromEnv) : prepareNextKey(config.dataDir);
    await withAdminTransaction(ctx.platformPool, (client) => resealColumns(client, to, from));
    if (!config.kek) commitKeyFile(config.dataDir);
  });
  process.stdout.write(
    config.kek
      ? "Secrets re-sealed. Set STRATA_KEK to the new key on every node and restart them.\n"
      : "Secrets re-sealed with a new key file. Restart every running Strata.\n",
  );
}

const USAGE = `usage: npm run strata -- <command>
  start            run the server (same as npm start)
  keys [--json]    print the default project's URLs, keys and management token
  kek rotate       re-seal the stored secrets under a new key-encryption key
  org plan <slug> [free|pro|team|enterprise]
                   print or set an organization's plan (what its projects may use)
  token create [--permissions a,b] [--name n] [--json]
                   create a Management API access token for the admin (all privileges, or only the
                   listed permissions)
  user password <email>
                   set the password a user signs in with (read from standard input); ends their sessions`;

/** The oldest Node.js major the server works on (grafast needs 22: on 20 every GraphQL query fails). */
const NODE_MAJOR = 22;

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const major = Number(process.versions.node.split(".")[0]);
  if (major < NODE_MAJOR)
    throw new StartupError(
      `strata: Node.js ${NODE_MAJOR} or newer is needed (this is ${process.version}); \`npm start\` runs the Node.js ${NODE_MAJOR} that \`npm install\` brought`,
    );
  switch (command) {
    case "start":
      return start();
    case "keys":
      return keys(rest.includes("--json"));
    case "token":
      return token(rest);
    case "org":
      return organizationPlan(rest);
    case "user":
      return userPassword(rest);
    case "kek":
      if (rest[0] !== "rotate") throw new KekError(USAGE);
      return rotateKek();
    default:
      process.stderr.write(USAGE + "\n");
      process.exitCode = command ? 2 : 0;
  }
}

main(process.argv.slice(2)).catch((e) => {
  const known =
    e instanceof ConfigError ||
    e instanceof StartupError ||
    e instanceof TokenError ||
    e instanceof KekError ||
    e instanceof PlanError ||
    e instanceof UserError ||
    e instanceof HttpError;
  process.stderr.write((known ? e.message : `strata: ${e?.stack ?? e}`) + "\n");
  process.exit(1);
});
