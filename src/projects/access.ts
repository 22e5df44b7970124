import { createHash } from "node:crypto";
import { chownSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import path from "node:path";
import type pg from "pg";
import { oneOffClient } from "../db/client";
import type { Logger } from "../log";

/**
 * Who may connect to the databases of a cluster Strata runs (the embedded one): each project's network
 * restrictions, SSL enforcement and network bans are written as a block of rules at the top of the
 * cluster's pg_hba.conf, which is then reloaded. Rules outside the block are left as they are.
 */

const BEGIN = "# BEGIN Strata-managed rules (rewritten by Strata: edits inside this block are lost)";
const END = "# END Strata-managed rules";
const METHOD = "scram-sha-256";
/** Strata's own connections come from loopback: never restricted, never banned. */
export const STRATA_ADDRESSES = ["127.0.0.1", "::1"];

export const RESTRICTIONS_DEFAULTS = { dbAllowedCidrs: ["0.0.0.0/0"], dbAllowedCidrsV6: ["::/0"] };
export type Restrictions = typeof RESTRICTIONS_DEFAULTS;
export const SSL_DEFAULTS = { database: false };
/**
 * `expires_at` maps each banned address to when its ban ends (ISO time). A ban recorded before bans expired
 * has no entry: it ends BAN_DURATION_MS after the row's last change.
 */
export const BANS_DEFAULTS = { banned: [] as string[], expires_at: {} as Record<string, string> };

/** Failed password logins from one address to one project's database before the address is banned. */
export const BAN_AFTER_FAILURES = 5;
/** ...within this window. */
export const BAN_WINDOW_MS = 10 * 60_000;
/**
 * How long a ban lasts unless lifted first: 30 minutes, as the platform's fail2ban jail (its bans are
 * temporary too); the address may then try again, and 5 more failures ban it again.
 */
export const BAN_DURATION_MS = 30 * 60_000;
/** How often a node looks for bans that ended (bans another node recorded, or missed timers). */
const BAN_SWEEP_MS = 60_000;

export interface ProjectAccessRules {
  database: string;
  restrictions: Restrictions;
  sslEnforced: boolean;
  banned: string[];
  /** Just-in-time logins limited to networks of their own (within the project's). */
  jitLogins?: { role: string; cidrs: string[] }[];
}

/** The login role of one user's just-in-time access to one role: `jit_<ref>_<user hash>_<role>`. */
export function jitLoginRole(ref: string, userId: string, role: string): string {
  return `jit_${ref}_${createHash("sha256").update(userId).digest("hex").slice(0, 8)}_${role}`;
}

const quoted = (name: string) => `"${name}"`;
const hostCidr = (address: string) =>
  address.includes("/") ? address : `${address}/${isIP(address) === 6 ? 128 : 32}`;

/** A project whose rules differ from "anyone, with or without TLS" gets lines of its own. */
function isOpen(rules: ProjectAccessRules): boolean {
  const { dbAllowedCidrs, dbAllowedCidrsV6 } = rules.restrictions;
  return !rules.sslEnforced && dbAllowedCidrs.includes("0.0.0.0/0") && dbAllowedCidrsV6.includes("::/0");
}

/** The managed block: first match wins, so loopback, then bans, then each restricted project, then everyone. */
export function renderAccessBlock(projects: ProjectAccessRules[]): string[] {
  const lines = [BEGIN, "# Strata's own connections (loopback) are always allowed"];
  for (const address of STRATA_ADDRESSES) lines.push(`host all all ${hostCidr(address)} ${METHOD}`);
  // Read replicas stream from loopback with roles of their own, members of this group (projects/replicas.ts).
  for (const address of STRATA_ADDRESSES)
    lines.push(`host replication +strata_replication ${hostCidr(address)} ${METHOD}`);
  for (const p of projects) {
    const db = quoted(p.database);
    for (const address of p.banned) lines.push(`host ${db} all ${hostCidr(address)} reject`);
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
  private partialLine = "";
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly expiryTimers = new Set<NodeJS.Timeout>();
  /** How long a ban recorded by this node lasts (BAN_DURATION_MS; shorter in tests). */
  banMs = BAN_DURATION_MS;
  /** Every whole line of the cluster's log (the projects' postgres_logs are read from it). */
  onLine: (line: string) => void = () => {};

  constructor(
    private readonly platformPool: pg.Pool,
    /** platform.clusters.id of the cluster. */
    readonly clusterId: string,
    /** Superuser URL of the cluster's maintenance database. */
    private readonly adminUrl: string,
    private readonly databaseDir: string,
    private readonly log: Logger,
  ) {}

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

  private async rules(): Promise<ProjectAccessRules[]> {
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
    return rows.map((r) => ({
      database: r.database_name,
      restrictions: { ...RESTRICTIONS_DEFAULTS, ...r.restrictions },
      sslEnforced: r.ssl?.database === true,
      banned: r.bans?.banned ?? [],
      jitLogins: grants
        .filter((g) => g.project_ref === r.ref)
        .map((g) => ({ role: jitLoginRole(g.project_ref, g.user_id, g.role), cidrs: g.cidrs })),
    }));
  }

  private async write(): Promise<void> {
    const file = path.join(this.databaseDir, "pg_hba.conf");
    const before = readFileSync(file, "utf8");
    const after = withAccessBlock(before, renderAccessBlock(await this.rules()));
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
   * Reads the cluster's log (its lines name the client's address and database): an address that fails
   * BAN_AFTER_FAILURES password logins to one project's database within BAN_WINDOW_MS is banned from it.
   */
  observeLog(chunk: string): void {
    const text = this.partialLine + chunk;
    const lines = text.split("\n");
    this.partialLine = lines.pop() ?? "";
    for (const line of lines) {
      this.onLine(line);
      const m = /host=(\S+) db=(\S+) FATAL:\s+password authentication failed/.exec(line);
      if (!m || STRATA_ADDRESSES.includes(m[1])) continue;
      this.countFailure(m[1], m[2]);
    }
  }

  private countFailure(address: string, database: string): void {
    const key = `${database}\n${address}`;
    const now = Date.now();
    const recent = (this.failures.get(key) ?? []).filter((t) => now - t < BAN_WINDOW_MS);
    recent.push(now);
    this.failures.set(key, recent);
    if (recent.length < BAN_AFTER_FAILURES) return;
    this.failures.delete(key);
    this.ban(address, database).catch((e) =>
      this.log.error({ err: (e as Error).message }, "banning an address failed"),
    );
  }

  private async ban(address: string, database: string): Promise<void> {
    const expires = new Date(Date.now() + this.banMs);
    const { rows } = await this.platformPool.query(
      `insert into platform.project_settings (project_ref, kind, value)
       select p.ref, 'network_bans',
              jsonb_build_object('banned', jsonb_build_array($3::text), 'expires_at', jsonb_build_object($3::text, $4::text))
         from platform.projects p where p.cluster_id = $1 and p.database_name = $2
       on conflict (project_ref, kind) do update
         set value = jsonb_build_object('banned',
               (select coalesce(jsonb_agg(distinct a), '[]'::jsonb)
                  from jsonb_array_elements_text(coalesce(project_settings.value->'banned', '[]'::jsonb) || (excluded.value->'banned')) a),
               'expires_at', coalesce(project_settings.value->'expires_at', '{}'::jsonb) || (excluded.value->'expires_at')),
             updated_at = now()
       returning project_ref`,
      [this.clusterId, database, address, expires.toISOString()],
    );
    if (!rows.length) return;
    this.log.warn(
      { ref: rows[0].project_ref, address, until: expires.toISOString() },
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

/** A CIDR of the given family as pg_hba.conf takes it, or why not (host bits must be zero). */
export function checkCidr(value: string, family: 4 | 6): string | undefined {
  const [address, bits, extra] = value.split("/");
  const max = family === 4 ? 32 : 128;
  if (extra !== undefined || isIP(address) !== family) return `must be an IPv${family} CIDR`;
  if (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= max))
    return `must be an IPv${family} CIDR (prefix length 0-${max})`;
  const prefix = bits === undefined ? max : Number(bits);
  const value128 = family === 4 ? ipv4Value(address) : ipv6Value(address);
  const hostBits = BigInt(max - prefix);
  if (value128 & ((1n << hostBits) - 1n)) return `has bits set past its /${prefix} prefix`;
  return undefined;
}

function ipv4Value(address: string): bigint {
  return address.split(".").reduce((v, part) => (v << 8n) | BigInt(Number(part)), 0n);
}

function ipv6Value(address: string): bigint {
  let text = address;
  // A trailing dotted IPv4 part (::ffff:1.2.3.4) becomes two hex groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const n = ipv4Value(v4[1]);
    text = text.slice(0, -v4[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.split("::");
  const headGroups = head ? head.split(":") : [];
  const tailGroups = tail ? tail.split(":") : [];
  const groups =
    tail === undefined
      ? headGroups
      : [...headGroups, ...Array(8 - headGroups.length - tailGroups.length).fill("0"), ...tailGroups];
  return groups.reduce((v, g) => (v << 16n) | BigInt(parseInt(g || "0", 16)), 0n);
}

function cidrParts(cidr: string): { family: 4 | 6; value: bigint; prefix: number } {
  const [address, bits] = cidr.split("/");
  const family = isIP(address) === 6 ? 6 : 4;
  const width = family === 4 ? 32 : 128;
  return {
    family,
    value: family === 4 ? ipv4Value(address) : ipv6Value(address),
    prefix: bits === undefined ? width : Number(bits),
  };
}

/** True when `address` (an IP) lies within `cidr`. */
export function cidrContains(cidr: string, address: string): boolean {
  if (isIP(address) === 0) return false;
  const c = cidrParts(cidr);
  const a = cidrParts(address);
  if (c.family !== a.family) return false;
  const shift = BigInt((c.family === 4 ? 32 : 128) - c.prefix);
  return a.value >> shift === c.value >> shift;
}

/** The CIDRs in both lists: of two nested CIDRs, the narrower one; disjoint ones give nothing. */
export function intersectCidrs(a: string[], b: string[]): string[] {
  const out = new Set<string>();
  for (const x of a)
    for (const y of b) {
      const px = cidrParts(x);
      const py = cidrParts(y);
      if (px.family !== py.family) continue;
      const [wide, narrow] = px.prefix <= py.prefix ? [px, py] : [py, px];
      const shift = BigInt((wide.family === 4 ? 32 : 128) - wide.prefix);
      if (narrow.value >> shift === wide.value >> shift) out.add(px.prefix <= py.prefix ? y : x);
    }
  return [...out];
}
