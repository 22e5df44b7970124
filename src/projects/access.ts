import { createHash } from "node:crypto";
import { chownSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import ipaddr from "ipaddr.js";
import type pg from "pg";
import { oneOffClient } from "../db/client";
import type { ClusterLogRecord } from "../db/clusterLog";
import type { Logger } from "../log";
import { intersectCidrs } from "../net/cidr";

/**
 * Who may connect to the databases of a cluster Strata runs (the embedded one): each project's network
 * restrictions, SSL enforcement and network bans are written as a block of rules at the top of the
 * cluster's pg_hba.conf, which is then reloaded. Rules outside the block are left as they are.
 */

const BEGIN = "# BEGIN Strata-managed rules (rewritten by Strata: edits inside this block are lost)";
const END = "# END Strata-managed rules";
const METHOD = "scram-sha-256";
/**
 * Strata's own connections come from loopback: never restricted, and never banned as a whole address (only a
 * tenant login is, see renderAccessBlock).
 */
export const STRATA_ADDRESSES = ["127.0.0.1", "::1"];
/** Strata's own logins are the cluster's superuser, the shared data login and the log queries' reader. */
const STRATA_LOGINS = ["authenticator", "strata_log_reader"];
/**
 * A project's SQL, read-only, auth and data logins (sql/project/010_project_roles.sql, 640_auth_role.sql,
 * 650_project_authenticator.sql); tenants cannot create roles.
 */
const STRATA_PROJECT_LOGIN = /^(strata_(sql|read|auth)|authenticator)_[a-z]{20}$/;
/** Every tenant login role (`postgres_<ref>`, JIT and CLI logins) is a plain lowercase name. */
const PLAIN_ROLE = /^[a-z_][a-z0-9_]{0,62}$/;

export const RESTRICTIONS_DEFAULTS = { dbAllowedCidrs: ["0.0.0.0/0"], dbAllowedCidrsV6: ["::/0"] };
export type Restrictions = typeof RESTRICTIONS_DEFAULTS;
export const SSL_DEFAULTS = { database: false };
/**
 * `banned` holds single addresses in canonical form (banAddress). `expires_at` maps each to when its ban ends
 * (ISO time); a ban recorded before bans expired has no entry: it ends BAN_DURATION_MS after the row's last
 * change. `users` maps a loopback address (Strata's own, never banned as a whole) to the tenant logins banned
 * from it; they share its end.
 */
export const BANS_DEFAULTS = {
  banned: [] as string[],
  expires_at: {} as Record<string, string>,
  users: {} as Record<string, string[]>,
};

/** Failed password logins from one address to one project's database before the address is banned. */
export const BAN_AFTER_FAILURES = 5;
/** ...within this window. */
export const BAN_WINDOW_MS = 10 * 60_000;
/**
 * How long a ban lasts unless lifted first: 30 minutes, as the platform's fail2ban jail (its bans are
 * temporary too); the address may then try again, and 5 more failures ban it again.
 */
export const BAN_DURATION_MS = 30 * 60_000;
/** How long a listener connection's port is known after it closed: its log records arrive within this. */
const RELAYED_PORT_KEPT_MS = 60_000;
/** How often a node looks for bans that ended (bans another node recorded, or missed timers). */
const BAN_SWEEP_MS = 60_000;

export interface ProjectAccessRules {
  database: string;
  restrictions: Restrictions;
  sslEnforced: boolean;
  /** Addresses banned from the database (never one of STRATA_ADDRESSES). */
  banned: string[];
  /** Tenant logins banned from the database when they come from one of STRATA_ADDRESSES. */
  loopbackBans?: { address: string; user: string }[];
  /** Just-in-time logins limited to networks of their own (within the project's). */
  jitLogins?: { role: string; cidrs: string[] }[];
}

/** The login role of one user's just-in-time access to one role: `jit_<ref>_<user hash>_<role>`. */
export function jitLoginRole(ref: string, userId: string, role: string): string {
  return `jit_${ref}_${createHash("sha256").update(userId).digest("hex").slice(0, 8)}_${role}`;
}

/** A name as one pg_hba.conf token, never a keyword (`all`, `samerole`, `+group`): quoted, quotes doubled. */
const quoted = (name: string) => `"${name.replace(/"/g, '""')}"`;
const hostCidr = (address: string) =>
  address.includes("/") ? address : `${address}/${isIP(address) === 6 ? 128 : 32}`;

/**
 * `value` as a ban may name it: exactly one IPv4 or IPv6 address a client can connect from, in canonical form
 * (an IPv4-mapped IPv6 address as IPv4); undefined for anything else — a CIDR, a name, a zone, an address
 * with leading zeros or fewer than four parts, the unspecified address, broadcast or multicast.
 */
export function banAddress(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  if (ipaddr.IPv4.isValidFourPartDecimal(value)) address = ipaddr.IPv4.parse(value);
  else if (ipaddr.IPv6.isValid(value) && !value.includes("%")) {
    const v6 = ipaddr.IPv6.parse(value);
    address = v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
  } else return undefined;
  if (["unspecified", "broadcast", "multicast"].includes(address.range())) return undefined;
  return address.toString();
}

/** True for the logins Strata itself connects with (from loopback): the superuser, the data login, SQL logins. */
function isStrataLogin(user: string, superuser: string): boolean {
  return user === superuser || STRATA_LOGINS.includes(user) || STRATA_PROJECT_LOGIN.test(user);
}

/** True for a login a loopback ban may name: a plain role name (as every tenant login is), never Strata's own. */
export function isBannableLogin(user: unknown, superuser: string): user is string {
  return typeof user === "string" && PLAIN_ROLE.test(user) && !isStrataLogin(user, superuser);
}

/** The pg_hba.conf user field of Strata's own logins. */
function strataLogins(superuser: string): string {
  return [...[superuser, ...STRATA_LOGINS].map(quoted), `/${STRATA_PROJECT_LOGIN.source}`].join(",");
}

/** A project whose rules differ from "anyone, with or without TLS" gets lines of its own. */
function isOpen(rules: ProjectAccessRules): boolean {
  const { dbAllowedCidrs, dbAllowedCidrsV6 } = rules.restrictions;
  return !rules.sslEnforced && dbAllowedCidrs.includes("0.0.0.0/0") && dbAllowedCidrsV6.includes("::/0");
}

/**
 * The managed block; the first rule that matches decides. Loopback first: Strata's own logins (allowed before
 * any ban, so no ban can lock Strata out), then loopback bans — each one tenant login of one database, refused
 * from the loopback address a local process guessed its password from — then every other loopback connection
 * (network restrictions do not apply to this machine). Then each project's banned addresses, JIT logins and
 * restrictions, then everyone. Only canonical single addresses reach a ban rule (banAddress, checked here
 * again), only plain role names a loopback ban.
 */
export function renderAccessBlock(projects: ProjectAccessRules[], superuser = "postgres"): string[] {
  const loopback = STRATA_ADDRESSES.map(hostCidr);
  const lines = [BEGIN, "# Strata's own logins from loopback: always allowed, before any ban"];
  for (const cidr of loopback) lines.push(`host all ${strataLogins(superuser)} ${cidr} ${METHOD}`);
  // Read replicas stream from loopback with roles of their own, members of this group (projects/replicas.ts).
  for (const cidr of loopback) lines.push(`host replication +strata_replication ${cidr} ${METHOD}`);
  lines.push("# Tenant logins banned from loopback, then every other loopback connection");
  for (const p of projects)
    for (const ban of p.loopbackBans ?? []) {
      const address = banAddress(ban.address);
      if (address && STRATA_ADDRESSES.includes(address) && isBannableLogin(ban.user, superuser))
        lines.push(`host ${quoted(p.database)} ${quoted(ban.user)} ${hostCidr(address)} reject`);
    }
  for (const cidr of loopback) lines.push(`host all all ${cidr} ${METHOD}`);
  for (const p of projects) {
    const db = quoted(p.database);
    for (const banned of p.banned) {
      const address = banAddress(banned);
      if (address && !STRATA_ADDRESSES.includes(address))
        lines.push(`host ${db} all ${hostCidr(address)} reject`);
    }
    const type = p.sslEnforced ? "hostssl" : "host";
    const allowed = [...p.restrictions.dbAllowedCidrs, ...p.restrictions.dbAllowedCidrsV6];
    for (const login of p.jitLogins ?? []) {
      // Only where both the login's and the project's networks allow; nowhere else.
      for (const cidr of intersectCidrs(login.cidrs, allowed))
        lines.push(`${type} ${db} ${quoted(login.role)} ${cidr} ${METHOD}`);
      lines.push(`host ${db} ${quoted(login.role)} all reject`);
    }
    if (isOpen(p)) continue;
    for (const cidr of allowed) lines.push(`${type} ${db} all ${cidr} ${METHOD}`);
    lines.push(`host ${db} all all reject`);
  }
  lines.push(`host all all all ${METHOD}`, END);
  return lines;
}

/**
 * A project's stored bans as rules, and the stored entries no rule may come from (recorded by older versions,
 * which took any text the log seemed to carry): not one single address, or a loopback address without a
 * tenant login to ban.
 */
export function banRules(
  stored: Partial<typeof BANS_DEFAULTS> | null,
  superuser: string,
): Pick<ProjectAccessRules, "banned" | "loopbackBans"> & { invalid: string[] } {
  const banned: string[] = [];
  const loopbackBans: { address: string; user: string }[] = [];
  const invalid: string[] = [];
  for (const entry of Array.isArray(stored?.banned) ? stored.banned : []) {
    const address = banAddress(entry);
    if (!address) invalid.push(String(entry));
    else if (!STRATA_ADDRESSES.includes(address)) banned.push(address);
    else {
      const users = stored?.users?.[entry];
      const logins = (Array.isArray(users) ? users : []).filter((u) => isBannableLogin(u, superuser));
      if (!logins.length) invalid.push(entry);
      for (const user of logins) loopbackBans.push({ address, user });
    }
  }
  return { banned: [...new Set(banned)], loopbackBans, invalid };
}

/**
 * Lifts the bans of `addresses` (any spelling of the same address; a loopback address with all its logins).
 * Entries are removed by name in one statement, so a ban recorded meanwhile for another address is kept.
 */
export async function liftBans(pool: pg.Pool, ref: string, addresses: string[]): Promise<void> {
  const wanted = new Set(addresses.map(banAddress));
  const { rows } = await pool.query<{ banned: unknown }>(
    "select value->'banned' as banned from platform.project_settings where project_ref = $1 and kind = 'network_bans'",
    [ref],
  );
  const stored = Array.isArray(rows[0]?.banned) ? (rows[0].banned as unknown[]) : [];
  const matching = stored.filter((s): s is string => typeof s === "string" && wanted.has(banAddress(s)));
  await removeBanEntries(pool, ref, [...new Set([...addresses, ...matching])]);
}

async function removeBanEntries(pool: pg.Pool, ref: string, entries: string[]): Promise<void> {
  await pool.query(
    `update platform.project_settings
        set value = value || jsonb_build_object(
              'banned', coalesce(value->'banned', '[]'::jsonb) - $2::text[],
              'expires_at', coalesce(value->'expires_at', '{}'::jsonb) - $2::text[],
              'users', coalesce(value->'users', '{}'::jsonb) - $2::text[]),
            updated_at = now()
      where project_ref = $1 and kind = 'network_bans'`,
    [ref, entries],
  );
}

/** A failed password login, as the server logs it during authentication (FATAL, SQLSTATE 28P01). */
export function failedPasswordLogin(
  record: ClusterLogRecord,
): { address: string; database: string; user: string | undefined } | undefined {
  if (
    record.error_severity !== "FATAL" ||
    record.state_code !== "28P01" ||
    record.backend_type !== "client backend" ||
    !record.message.startsWith('password authentication failed for user "')
  )
    return undefined;
  const address = banAddress(record.remote_host);
  if (!address || !record.dbname) return undefined;
  return { address, database: record.dbname, user: record.user };
}

/** The file with its managed block replaced (or put first). */
export function withAccessBlock(file: string, block: string[]): string {
  const kept: string[] = [];
  let inside = false;
  for (const line of file.split("\n")) {
    if (line === BEGIN) inside = true;
    else if (line === END) inside = false;
    else if (!inside) kept.push(line);
  }
  return [...block, ...kept].join("\n");
}

interface ProjectRow {
  ref: string;
  database_name: string;
  restrictions: Partial<Restrictions> | null;
  ssl: Partial<typeof SSL_DEFAULTS> | null;
  bans: Partial<typeof BANS_DEFAULTS> | null;
}

/** The access rules of a cluster Strata runs; one instance per process, for the embedded cluster. */
export class ClusterAccess {
  private queue: Promise<void> = Promise.resolve();
  private readonly failures = new Map<string, number[]>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly expiryTimers = new Set<NodeJS.Timeout>();
  /** How long a ban recorded by this node lasts (BAN_DURATION_MS; shorter in tests). */
  banMs = BAN_DURATION_MS;
  /** Every record of the cluster's log (the projects' postgres_logs are read from it). */
  onRecord: (record: ClusterLogRecord) => void = () => {};

  constructor(
    private readonly platformPool: pg.Pool,
    /** platform.clusters.id of the cluster. */
    readonly clusterId: string,
    /** Superuser URL of the cluster's maintenance database. */
    private readonly adminUrl: string,
    private readonly databaseDir: string,
    private readonly log: Logger,
  ) {
    this.superuser = decodeURIComponent(new URL(adminUrl).username);
  }

  /** The cluster's superuser, Strata's own login (never banned). */
  private readonly superuser: string;

  /** Told the file after each rewrite: the cluster's read replicas take the same rules. */
  onWritten?: (pgHba: string) => Promise<void>;

  /** True when the project's rules are enforced on its cluster (not only stored). */
  manages(clusterId: string): boolean {
    return clusterId === this.clusterId;
  }

  /** Rewrites pg_hba.conf from the control plane and reloads; calls are run one after another. */
  apply(): Promise<void> {
    const next = this.queue.then(() => this.write());
    this.queue = next.catch(() => {});
    return next;
  }

  /** The rules of the cluster's projects, and each project's stored ban entries no rule may come from. */
  private async rules(): Promise<{ rules: ProjectAccessRules[]; invalid: Map<string, string[]> }> {
    const { rows } = await this.platformPool.query<ProjectRow>(
      `select p.ref, p.database_name,
              (select value from platform.project_settings s where s.project_ref = p.ref and s.kind = 'network_restrictions') as restrictions,
              (select value from platform.project_settings s where s.project_ref = p.ref and s.kind = 'ssl_enforcement') as ssl,
              (select value from platform.project_settings s where s.project_ref = p.ref and s.kind = 'network_bans') as bans
         from platform.projects p where p.cluster_id = $1 order by p.id`,
      [this.clusterId],
    );
    const { rows: grants } = await this.platformPool.query<{
      project_ref: string;
      user_id: string;
      role: string;
      cidrs: string[];
    }>(
      `select g.project_ref, g.user_id::text, g.role, g.allowed_cidrs || g.allowed_cidrs_v6 as cidrs
         from platform.jit_grants g join platform.projects p on p.ref = g.project_ref
        where p.cluster_id = $1 and cardinality(g.allowed_cidrs || g.allowed_cidrs_v6) > 0
        order by g.project_ref, g.user_id, g.role`,
      [this.clusterId],
    );
    const invalid = new Map<string, string[]>();
    const rules = rows.map((r) => {
      const bans = banRules(r.bans, this.superuser);
      if (bans.invalid.length) invalid.set(r.ref, bans.invalid);
      return {
        database: r.database_name,
        restrictions: { ...RESTRICTIONS_DEFAULTS, ...r.restrictions },
        sslEnforced: r.ssl?.database === true,
        banned: bans.banned,
        loopbackBans: bans.loopbackBans,
        jitLogins: grants
          .filter((g) => g.project_ref === r.ref)
          .map((g) => ({ role: jitLoginRole(g.project_ref, g.user_id, g.role), cidrs: g.cidrs })),
      };
    });
    return { rules, invalid };
  }

  /** Stored ban entries no rule was written from are dropped, so they are neither listed nor kept. */
  private async dropInvalidBans(invalid: Map<string, string[]>): Promise<void> {
    for (const [ref, entries] of invalid) {
      this.log.warn({ ref, entries }, "stored network bans that are not single addresses were dropped");
      await removeBanEntries(this.platformPool, ref, entries);
    }
  }

  private async write(): Promise<void> {
    const file = path.join(this.databaseDir, "pg_hba.conf");
    const before = readFileSync(file, "utf8");
    const { rules, invalid } = await this.rules();
    const after = withAccessBlock(before, renderAccessBlock(rules, this.superuser));
    const client = oneOffClient({ connectionString: this.adminUrl, connectionTimeoutMillis: 10_000 });
    await client.connect();
    try {
      if (after !== before) {
        replaceFile(file, after);
        // Postgres parses the file on disk here: a rule it cannot read puts the old file back.
        const { rows } = await client.query(
          "select line_number, error from pg_hba_file_rules where error is not null limit 1",
        );
        if (rows.length) {
          replaceFile(file, before);
          throw new Error(`pg_hba.conf line ${rows[0].line_number}: ${rows[0].error}`);
        }
      }
      const { rows } = await client.query("select pg_reload_conf(), now() as asked");
      await this.waitForReload(rows[0].asked);
    } finally {
      await client.end().catch(() => {});
    }
    await this.dropInvalidBans(invalid);
    await this.onWritten?.(after).catch((e: Error) =>
      this.log.warn({ err: e.message }, "the read replicas did not take the access rules"),
    );
  }

  /** The postmaster reloads when it gets to the signal: new sessions see the rules once it has. */
  private async waitForReload(asked: Date): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const probe = oneOffClient({ connectionString: this.adminUrl, connectionTimeoutMillis: 10_000 });
      await probe.connect();
      try {
        const { rows } = await probe.query("select pg_conf_load_time() >= $1 as reloaded", [asked]);
        if (rows[0].reloaded) return;
      } finally {
        await probe.end().catch(() => {});
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    this.log.warn("the embedded PostgreSQL has not reloaded pg_hba.conf yet");
  }

  /**
   * Reads the cluster's log records: an address that fails BAN_AFTER_FAILURES password logins to one project's
   * database within BAN_WINDOW_MS is banned from it. Only the server's own record of a failed authentication
   * counts (its address and database are fields the server sets; clusterLog.ts says why no client text can
   * pass for them). Failures from loopback count too, per login: a process on this machine (an edge function)
   * guessing a tenant's password gets that login banned from loopback, while Strata's own logins, which
   * connect from there, are never counted (they could not be banned without locking Strata out).
   */
  observeLog(record: ClusterLogRecord): void {
    this.onRecord(record);
    const failure = failedPasswordLogin(record);
    // The database listener's connections fail from loopback for clients elsewhere: it reports them itself.
    if (!failure || (record.remote_port !== undefined && this.relayedPorts.has(record.remote_port))) return;
    this.countLoginFailure(failure.address, failure.database, failure.user);
  }

  private countLoginFailure(address: string, database: string, user: string | undefined): void {
    if (!STRATA_ADDRESSES.includes(address)) this.countFailure(address, database);
    else if (isBannableLogin(user, this.superuser)) this.countFailure(address, database, user);
  }

  /** Local ports of the database listener's connections to this cluster (src/pooler/listener.ts). */
  private readonly relayedPorts = new Set<number>();

  /**
   * Notes a connection of the database listener, by its local port, until the function answered is called (and a
   * while after, for the log records still on their way).
   */
  relaying(port: number): () => void {
    this.relayedPorts.add(port);
    return () => setTimeout(() => this.relayedPorts.delete(port), RELAYED_PORT_KEPT_MS).unref();
  }

  /** A failed password login the database listener relayed, counted by the client's own address. */
  relayedLoginFailure(address: string, database: string, user: string): void {
    const canonical = banAddress(address);
    if (canonical) this.countLoginFailure(canonical, database, user);
  }

  private countFailure(address: string, database: string, user?: string): void {
    const key = JSON.stringify([database, address, user]);
    const now = Date.now();
    const recent = (this.failures.get(key) ?? []).filter((t) => now - t < BAN_WINDOW_MS);
    recent.push(now);
    this.failures.set(key, recent);
    if (recent.length < BAN_AFTER_FAILURES) return;
    this.failures.delete(key);
    this.ban(address, database, user).catch((e) =>
      this.log.error({ err: (e as Error).message }, "banning an address failed"),
    );
  }

  /** Records the ban of `address` (of only `user` from it, for a loopback address), then rewrites pg_hba.conf. */
  private async ban(address: string, database: string, user: string | undefined): Promise<void> {
    const expires = new Date(Date.now() + this.banMs);
    const { rows } = await this.platformPool.query(
      `insert into platform.project_settings (project_ref, kind, value)
       select p.ref, 'network_bans',
              jsonb_build_object('banned', jsonb_build_array($3::text),
                                 'expires_at', jsonb_build_object($3::text, $4::text),
                                 'users', case when $5::text is null then '{}'::jsonb
                                               else jsonb_build_object($3::text, jsonb_build_array($5::text)) end)
         from platform.projects p where p.cluster_id = $1 and p.database_name = $2
       on conflict (project_ref, kind) do update
         set value = project_settings.value || jsonb_build_object(
               'banned', (select coalesce(jsonb_agg(distinct a), '[]'::jsonb)
                            from jsonb_array_elements_text(coalesce(project_settings.value->'banned', '[]'::jsonb) || (excluded.value->'banned')) a),
               'expires_at', coalesce(project_settings.value->'expires_at', '{}'::jsonb) || (excluded.value->'expires_at'),
               'users', coalesce(project_settings.value->'users', '{}'::jsonb)
                        || (select coalesce(jsonb_object_agg(e.address, (select jsonb_agg(distinct u)
                                      from jsonb_array_elements_text(coalesce(project_settings.value->'users'->e.address, '[]'::jsonb) || e.users) u)), '{}'::jsonb)
                              from jsonb_each(excluded.value->'users') e(address, users))),
             updated_at = now()
       returning project_ref`,
      [this.clusterId, database, address, expires.toISOString(), user ?? null],
    );
    if (!rows.length) return;
    this.log.warn(
      { ref: rows[0].project_ref, address, user, until: expires.toISOString() },
      "address banned after repeated failed logins",
    );
    this.expireAt(expires.getTime());
    await this.apply();
  }

  /** Starts lifting bans whose time has come: on a timer, and at once for the bans this node records. */
  startExpiry(): void {
    this.sweepTimer ??= setInterval(() => void this.sweepSafely(), BAN_SWEEP_MS);
    this.sweepTimer.unref();
    void this.sweepSafely();
  }

  stopExpiry(): void {
    clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
    for (const timer of this.expiryTimers) clearTimeout(timer);
    this.expiryTimers.clear();
  }

  private expireAt(when: number): void {
    if (!this.sweepTimer) return;
    const timer = setTimeout(
      () => {
        this.expiryTimers.delete(timer);
        void this.sweepSafely();
      },
      Math.max(0, when - Date.now()) + 50,
    );
    timer.unref();
    this.expiryTimers.add(timer);
  }

  private async sweepSafely(): Promise<void> {
    await this.sweepExpiredBans().catch((e) =>
      this.log.warn({ err: (e as Error).message }, "lifting expired bans failed"),
    );
  }

  /**
   * Removes the bans of this cluster's projects whose time has passed, in one statement (a ban recorded
   * meanwhile is kept), then rewrites pg_hba.conf when any went. Answers the number lifted.
   */
  async sweepExpiredBans(): Promise<number> {
    const { rows } = await this.platformPool.query<{ lifted: number }>(
      `with due as (
         select s.project_ref, a.address
           from platform.project_settings s join platform.projects p on p.ref = s.project_ref
           cross join lateral jsonb_array_elements_text(coalesce(s.value->'banned', '[]'::jsonb)) a(address)
          where s.kind = 'network_bans' and p.cluster_id = $1
            and coalesce((s.value->'expires_at'->>a.address)::timestamptz, s.updated_at + $2 * interval '1 millisecond') <= now()
       ), lifted as (
         update platform.project_settings s
            set value = jsonb_build_object(
                  'banned', coalesce((select jsonb_agg(b) from jsonb_array_elements_text(s.value->'banned') b
                                       where b not in (select address from due where due.project_ref = s.project_ref)), '[]'::jsonb),
                  'expires_at', coalesce(s.value->'expires_at', '{}'::jsonb)
                                  - (select array_agg(address) from due where due.project_ref = s.project_ref),
                  'users', coalesce(s.value->'users', '{}'::jsonb)
                             - (select array_agg(address) from due where due.project_ref = s.project_ref)),
                updated_at = now()
          where s.kind = 'network_bans' and s.project_ref in (select project_ref from due)
         returning 1)
       select (select count(*) from due)::int as lifted`,
      [this.clusterId, BAN_DURATION_MS],
    );
    const lifted = rows[0].lifted;
    if (lifted) {
      this.log.info({ lifted }, "network bans expired");
      await this.apply();
    }
    return lifted;
  }
}

/** Replaces a file of the cluster's, keeping its owner (the OS user PostgreSQL runs as) and mode. */
export function replaceFile(file: string, text: string): void {
  const { uid, gid, mode } = statSync(file);
  const temporary = `${file}.strata-${process.pid}`;
  writeFileSync(temporary, text, { mode: mode & 0o777 });
  chownSync(temporary, uid, gid);
  renameSync(temporary, file);
}
