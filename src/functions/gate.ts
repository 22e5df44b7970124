import type { Request } from "express";
import pg from "pg";
import { mintLegacyKey } from "../auth/legacyKeys";
import { verifyJwt } from "../auth/verifyJwt";
import type { AppContext } from "../context";
import { openProject } from "../http/gate";
import { decryptSecret } from "../platform/secrets";
import { kekOf } from "../platform/kek";
import type { ProjectRecord, ProjectRuntime } from "../projects/runtime";
import type { DeployedFile } from "./files";

/** Every call from functions to the data platform: project, JWT, deployed function, secrets, logs. */

/** The project an invocation addresses (Host), through the data gate; a refusal is a GateError. */
export const projectOf = (ctx: AppContext, req: Request) => openProject(ctx, req);

/** A refused invocation: the platform's 401 before the function runs. */
export class InvalidJwt extends Error {}

/** verify_jwt: the Authorization header must carry a JWT the project accepts. */
export async function checkJwt(project: ProjectRuntime, authorization: string | undefined) {
  const token = /^bearer\s+(.+)$/i.exec(authorization ?? "")?.[1]?.trim();
  if (!token) throw new InvalidJwt("Missing authorization header");
  await verifyJwt(project, token).catch(() => {
    throw new InvalidJwt("Invalid JWT");
  });
}

/** A deployed function as the runtime needs it. */
export interface DeployedFunction {
  id: string;
  slug: string;
  version: number;
  verifyJwt: boolean;
  entrypoint: string;
  importMap: string | undefined;
}

/** A secret as stored: its value sealed with the project's root key, itself sealed with the KEK. */
interface SealedSecret {
  name: string;
  ciphertext: string;
  root_key: string;
}

/** The deployed function of a slug and the project's secrets, decrypted. */
export interface Deployed {
  fn: DeployedFunction;
  secrets: Record<string, string>;
}

/** What the management side announces on a deploy, update, delete or secret change: the project's ref. */
export const FUNCTIONS_CHANGED = "strata_functions_changed";

/**
 * Tells every node that a project's functions or secrets changed, so their cached rows go (DeployedFunctions).
 * Sent in the writer's transaction, a notification is delivered once it commits.
 */
export async function announceFunctionsChanged(db: Pick<pg.ClientBase, "query">, ref: string) {
  await db.query("select pg_notify($1, $2)", [FUNCTIONS_CHANGED, ref]);
}

/**
 * The deployed functions of this node's projects, read once and kept until a change is announced
 * (announceFunctionsChanged, on any node): an invocation costs no round trip to the control plane. Kept only
 * while the node LISTENs; a lost connection empties the cache and reads every time until it listens again
 * (reconnected after a second), so a change missed meanwhile is never served. A read that began before a
 * change of its project is not kept. Entries are per project record: a new record (the project changed)
 * reads again.
 */
export class DeployedFunctions {
  private readonly cache = new Map<
    string,
    { record: ProjectRecord; bySlug: Map<string, Deployed | undefined> }
  >();
  /** Changes seen per project, so a read that overlapped one is not kept. */
  private readonly changes = new Map<string, number>();
  private listener: pg.Client | undefined;
  private listening = false;
  /** Counts the starts and ends of listening: a read that overlapped one is not kept either. */
  private epoch = 0;
  private closed = false;

  constructor(private readonly ctx: AppContext) {
    void this.listen();
  }

  async get(project: ProjectRuntime, slug: string): Promise<Deployed | undefined> {
    const { ref, record } = project;
    const entry = this.cache.get(ref);
    if (entry?.record === record && entry.bySlug.has(slug)) return entry.bySlug.get(slug);
    const epoch = this.epoch;
    const seen = this.changes.get(ref) ?? 0;
    const deployed = await readDeployedFunction(this.ctx, ref, slug);
    if (this.listening && this.epoch === epoch && (this.changes.get(ref) ?? 0) === seen) {
      let current = this.cache.get(ref);
      if (current?.record !== record) this.cache.set(ref, (current = { record, bySlug: new Map() }));
      current.bySlug.set(slug, deployed);
    }
    return deployed;
  }

  /**
   * Drops what is kept of `ref`: on a change announced by any node, and at once on the node that made it, after
   * its transaction committed (its own notification may come back after the caller's next invocation).
   */
  forget(ref: string) {
    this.changes.set(ref, (this.changes.get(ref) ?? 0) + 1);
    this.cache.delete(ref);
  }

  private forgetAll() {
    this.listening = false;
    this.epoch++;
    this.cache.clear();
  }

  private async listen(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.ctx.controlUrl });
    this.listener = client;
    const retry = () => {
      if (this.listener !== client) return;
      this.listener = undefined;
      this.forgetAll();
      client.end().catch(() => {});
      if (!this.closed) setTimeout(() => void this.listen(), 1000).unref();
    };
    client.on("error", retry);
    client.on("end", retry);
    client.on("notification", (msg) => {
      if (msg.channel === FUNCTIONS_CHANGED && msg.payload) this.forget(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`listen ${FUNCTIONS_CHANGED}`);
      // Reads from now on are kept; nothing was kept while not listening.
      if (this.listener === client) {
        this.listening = true;
        this.epoch++;
      }
    } catch {
      retry();
    }
  }

  async close() {
    this.closed = true;
    const client = this.listener;
    this.listener = undefined;
    this.forgetAll();
    await client?.end().catch(() => {});
  }
}

/** The deployed function of a slug and the project's secrets, decrypted: one round trip. */
async function readDeployedFunction(
  ctx: AppContext,
  ref: string,
  slug: string,
): Promise<Deployed | undefined> {
  const { rows } = await ctx.platformPool.query(
    `select f.id, f.slug, f.version, f.verify_jwt, f.entrypoint_path, f.import_map_path,
            (select coalesce(json_agg(json_build_object('name', s.name, 'ciphertext', s.ciphertext,
                                                        'root_key', k.root_key)), '[]')
               from platform.project_secrets s join platform.project_root_keys k using (project_ref)
              where s.project_ref = f.project_ref) as secrets
       from platform.edge_functions f
      where f.project_ref = $1 and f.slug = $2 and f.status = 'ACTIVE'`,
    [ref, slug],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    fn: {
      id: r.id,
      slug: r.slug,
      version: r.version,
      verifyJwt: r.verify_jwt,
      entrypoint: r.entrypoint_path ?? "index.ts",
      importMap: r.import_map_path ?? undefined,
    },
    secrets: decryptSecrets(ctx, r.secrets as SealedSecret[]),
  };
}

export async function deployedFiles(ctx: AppContext, id: string, version: number): Promise<DeployedFile[]> {
  const { rows } = await ctx.platformPool.query(
    "select files from platform.edge_functions where id = $1 and version = $2",
    [id, version],
  );
  if (!rows.length) throw new Error("The function was redeployed or deleted meanwhile");
  return rows[0].files;
}

function decryptSecrets(ctx: AppContext, sealed: SealedSecret[]): Record<string, string> {
  const kek = kekOf(ctx.platformPool);
  return Object.fromEntries(
    sealed.map((r) => [
      r.name,
      decryptSecret(kek.open(r.root_key, "platform.project_root_keys.root_key"), r.ciphertext),
    ]),
  );
}

/**
 * The defaults every function gets: the project's URL, its keys and its database. The URL is the project's
 * own host on this Strata (`<ref>.<STRATA_DOMAIN>`), whatever host an invocation came to, so no caller
 * decides where a function sends the project's keys; the function reaches it over its API socket
 * (channel.ts).
 */
export function defaultEnv(ctx: AppContext, project: ProjectRuntime): Promise<Record<string, string>> {
  const { record } = project;
  let env = defaultEnvs.get(record);
  if (!env) {
    env = mintDefaultEnv(ctx, project.ref, record);
    env.catch(() => defaultEnvs.delete(record));
    defaultEnvs.set(record, env);
  }
  return env;
}

/**
 * Per project record: a change of the project's secret, keys or login comes as a new record (the registry's
 * refresh), so the keys are signed once per record, not on every invocation.
 */
const defaultEnvs = new WeakMap<ProjectRecord, Promise<Record<string, string>>>();

async function mintDefaultEnv(
  ctx: AppContext,
  ref: string,
  record: ProjectRecord,
): Promise<Record<string, string>> {
  const { jwtSecret, legacyKeysIat, sqlUrl } = record;
  return {
    SUPABASE_URL: `http://${ref}.${ctx.config.domain}:${ctx.config.port}`,
    SUPABASE_ANON_KEY: await mintLegacyKey(jwtSecret, "anon", legacyKeysIat),
    SUPABASE_SERVICE_ROLE_KEY: await mintLegacyKey(jwtSecret, "service_role", legacyKeysIat),
    // The project's own SQL login (acting as its owner, as the platform's `postgres`), which may connect to
    // this project's database only; never `authenticator`, which every project database admits.
    SUPABASE_DB_URL: sqlUrl,
  };
}

/** A row of platform.function_logs. */
export interface FunctionLogRow {
  ref: string;
  functionId: string;
  slug: string;
  version: number;
  kind: "console" | "invocation";
  level?: string;
  message?: string;
  method?: string;
  path?: string;
  status?: number;
  durationMs?: number;
  at: Date;
}

export async function writeFunctionLogs(ctx: AppContext, rows: FunctionLogRow[]) {
  await ctx.platformPool.query(
    `insert into platform.function_logs
       (project_ref, function_id, slug, version, kind, level, message, method, path, status, duration_ms, created_at)
     select * from unnest($1::text[], $2::uuid[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[],
       $8::text[], $9::text[], $10::int[], $11::int[], $12::timestamptz[])
       as t (ref, function_id, slug, version, kind, level, message, method, path, status, duration_ms, created_at)
     -- A project deleted meanwhile takes its logs with it.
     where exists (select 1 from platform.projects p where p.ref = t.ref)`,
    [
      rows.map((r) => r.ref),
      rows.map((r) => r.functionId),
      rows.map((r) => r.slug),
      rows.map((r) => r.version),
      rows.map((r) => r.kind),
      rows.map((r) => r.level ?? null),
      rows.map((r) => r.message ?? null),
      rows.map((r) => r.method ?? null),
      rows.map((r) => r.path ?? null),
      rows.map((r) => r.status ?? null),
      rows.map((r) => r.durationMs ?? null),
      rows.map((r) => r.at),
    ],
  );
}
