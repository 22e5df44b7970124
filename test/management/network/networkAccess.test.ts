import { execFile } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import net, { createServer } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../../src/app";
import { loadConfig } from "../../../src/config";
import { createLogger } from "../../../src/log";
import { intersectCidrs } from "../../../src/net/cidr";
import { BAN_DURATION_MS, banAddress, renderAccessBlock } from "../../../src/projects/access";
import { TEST_AUTHENTICATOR_PASSWORD, TEST_MANAGEMENT_TOKEN } from "../../helpers/server";
import { testTempDir } from "../../helpers/tempDir";

/**
 * pg_hba.conf, TLS and bans are cluster-wide: this file runs Strata with its own embedded PostgreSQL. The
 * machine may only have loopback, so "another address" is 127.0.0.2 (loopback too, but not an address Strata
 * connects from): a client socket bound to it reaches the cluster from an address the rules do not exempt.
 */

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const OTHER = "127.0.0.2";

describe("network restrictions, SSL enforcement, bans and the pool on Strata's own cluster", () => {
  let dir: string;
  let pgPort: number;
  let strata: RunningStrata;
  let superPassword: string;
  let database: string;
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${strata.port}/v1/projects/${strata.info.ref}${p}`, {
      method,
      headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  /** Connects as the superuser from `from` (127.0.0.1 or 127.0.0.2); answers "connected" or the error. */
  async function tryConnect(
    from: string,
    opts: { ssl?: boolean; password?: string; user?: string } = {},
  ): Promise<string> {
    const client = new pg.Client({
      host: "127.0.0.1",
      port: pgPort,
      user: opts.user ?? "postgres",
      password: opts.password ?? superPassword,
      database,
      ssl: opts.ssl ? { rejectUnauthorized: false } : false,
      stream: () => {
        const socket = new net.Socket();
        const connect = socket.connect.bind(socket) as (o: net.TcpNetConnectOpts) => net.Socket;
        (socket as unknown as { connect: unknown }).connect = (port: number, host: string) =>
          connect({ port, host, localAddress: from });
        return socket;
      },
    });
    client.on("error", () => {});
    try {
      await client.connect();
      const { rows } = await client.query(
        "select host(inet_client_addr()) as addr, ssl from pg_stat_ssl where pid = pg_backend_pid()",
      );
      await client.end();
      expect(rows[0].addr).toBe(from);
      return opts.ssl ? (rows[0].ssl ? "connected" : "plain") : "connected";
    } catch (e) {
      await client.end().catch(() => {});
      return (e as Error).message;
    }
  }

  beforeAll(async () => {
    dir = testTempDir("strata-netaccess-");
    pgPort = await freePort();
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(pgPort),
        STRATA_DATA_DIR: dir,
        MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        STRATA_KEK: "test-key-encryption-key-of-at-least-32-chars",
      }),
      createLogger("silent"),
    );
    superPassword = readFileSync(path.join(dir, "pg-superuser-password"), "utf8").trim();
    database = new URL(strata.ctx.adminUrl).pathname.slice(1);
  }, 120_000);
  afterAll(async () => {
    await strata?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("enforces network restrictions in pg_hba.conf: a restricted address cannot connect, loopback can", async () => {
    expect(await tryConnect(OTHER)).toBe("connected");
    const applied = await api("POST", "/network-restrictions/apply", { dbAllowedCidrs: ["10.0.0.0/8"] });
    expect(applied.status).toBe(201);
    expect(applied.body).toMatchObject({
      status: "applied",
      config: { dbAllowedCidrs: ["10.0.0.0/8"], dbAllowedCidrsV6: ["::/0"] },
      old_config: { dbAllowedCidrs: ["0.0.0.0/0"] },
    });
    expect(await tryConnect(OTHER)).toMatch(/pg_hba\.conf rejects connection/);
    expect(await tryConnect("127.0.0.1")).toBe("connected");
    const hba = readFileSync(path.join(dir, "pgdata", "pg_hba.conf"), "utf8");
    expect(hba).toContain(`host "${database}" all 10.0.0.0/8 scram-sha-256`);

    const patched = await api("PATCH", "/network-restrictions", {
      add: { dbAllowedCidrs: ["127.0.0.2/32"] },
    });
    expect(patched.body.config.dbAllowedCidrs).toContainEqual({ address: "127.0.0.2/32", type: "v4" });
    expect(await tryConnect(OTHER)).toBe("connected");

    // Host bits past the prefix, or a v6 CIDR in the v4 list: 400, nothing changed.
    for (const body of [{ dbAllowedCidrs: ["10.0.0.1/8"] }, { dbAllowedCidrs: ["::/0"] }]) {
      expect((await api("POST", "/network-restrictions/apply", body)).status).toBe(400);
    }
    expect(await tryConnect(OTHER)).toBe("connected");
    await api("POST", "/network-restrictions/apply", { dbAllowedCidrs: ["0.0.0.0/0"] });
  });

  it("serves TLS with a generated certificate and refuses plain connections once SSL is enforced", async () => {
    expect(await tryConnect(OTHER, { ssl: true })).toBe("connected");
    const put = await api("PUT", "/ssl-enforcement", { requestedConfig: { database: true } });
    expect(put.body).toEqual({ currentConfig: { database: true }, appliedSuccessfully: true });
    expect(await tryConnect(OTHER)).toMatch(/pg_hba\.conf rejects connection .*no encryption/);
    expect(await tryConnect(OTHER, { ssl: true })).toBe("connected");
    // Strata's own loopback connections need no TLS.
    expect(await tryConnect("127.0.0.1")).toBe("connected");
    await api("PUT", "/ssl-enforcement", { requestedConfig: { database: false } });
    expect(await tryConnect(OTHER)).toBe("connected");
  });

  it("bans an address after repeated failed password logins until the ban is lifted", async () => {
    for (let i = 0; i < 5; i++)
      expect(await tryConnect(OTHER, { password: "wrong-password" })).toMatch(
        /password authentication failed/,
      );
    let banned: string[] = [];
    for (let i = 0; i < 100 && !banned.includes(OTHER); i++) {
      banned = (await api("POST", "/network-bans/retrieve")).body.banned_ipv4_addresses;
      if (!banned.includes(OTHER)) await new Promise((r) => setTimeout(r, 100));
    }
    expect(banned).toContain(OTHER);
    // The ban is listed once recorded; pg_hba.conf is rewritten and reloaded right after.
    let refused = "";
    for (let i = 0; i < 100 && !/rejects/.test(refused); i++) {
      refused = await tryConnect(OTHER);
      if (!/rejects/.test(refused)) await new Promise((r) => setTimeout(r, 100));
    }
    expect(refused).toMatch(/pg_hba\.conf rejects connection/);
    expect(await tryConnect("127.0.0.1")).toBe("connected");
    expect((await api("POST", "/network-bans/retrieve/enriched")).body.banned_ipv4_addresses).toContainEqual({
      banned_address: OTHER,
      identifier: "database",
      type: "fail2ban",
    });
    expect((await api("DELETE", "/network-bans", { ipv4_addresses: [OTHER] })).status).toBe(200);
    expect((await api("POST", "/network-bans/retrieve")).body.banned_ipv4_addresses).toEqual([]);
    expect(await tryConnect(OTHER)).toBe("connected");
  });

  it("lifts a ban by itself when its time is up and rewrites pg_hba.conf", async () => {
    // Bans last 30 minutes; this node's are made short here so the test can watch one end.
    strata.ctx.access!.banMs = 3000;
    const hba = () => readFileSync(path.join(dir, "pgdata", "pg_hba.conf"), "utf8");
    const rejectLine = `host "${database}" all ${OTHER}/32 reject`;
    for (let i = 0; i < 5; i++)
      expect(await tryConnect(OTHER, { password: "wrong-password" })).toMatch(
        /password authentication failed/,
      );
    for (let i = 0; i < 100 && !hba().includes(rejectLine); i++) await new Promise((r) => setTimeout(r, 50));
    expect(hba()).toContain(rejectLine);
    const { rows } = await strata.ctx.platformPool.query(
      "select value from platform.project_settings where project_ref = $1 and kind = 'network_bans'",
      [strata.info.ref],
    );
    const until = Date.parse(rows[0].value.expires_at[OTHER]);
    expect(until - Date.now()).toBeLessThanOrEqual(3000);
    // The file is written before the cluster reloads it: the ban acts once a connection is refused.
    let refused = "";
    for (let i = 0; i < 100 && !/rejects/.test(refused) && Date.now() < until; i++) {
      refused = await tryConnect(OTHER);
      if (!/rejects/.test(refused)) await new Promise((r) => setTimeout(r, 50));
    }
    // No DELETE: the ban ends, the rule goes and the address may connect again.
    let result = "";
    for (let i = 0; i < 200 && result !== "connected"; i++) {
      result = await tryConnect(OTHER);
      if (result !== "connected") await new Promise((r) => setTimeout(r, 100));
    }
    expect(result).toBe("connected");
    expect(Date.now()).toBeGreaterThanOrEqual(until);
    expect(hba()).not.toContain(rejectLine);
    expect((await api("POST", "/network-bans/retrieve")).body.banned_ipv4_addresses).toEqual([]);
    strata.ctx.access!.banMs = BAN_DURATION_MS;
  });

  it("sizes the project's own pool with default_pool_size", async () => {
    const runtime = () => strata.ctx.registry.get(strata.info.ref);
    expect((await runtime())!.dataPool.options.max).toBe(10);
    const patched = await api("PATCH", "/config/database/pooler", { default_pool_size: 3 });
    expect(patched.body).toEqual({ default_pool_size: 3, pool_mode: "transaction" });
    let max = 0;
    for (let i = 0; i < 50 && max !== 3; i++) {
      max = (await runtime())!.dataPool.options.max!;
      if (max !== 3) await new Promise((r) => setTimeout(r, 100));
    }
    expect(max).toBe(3);
    expect((await api("GET", "/config/database/poolb")).body.default_pool_size).toBe(3);
    expect((await api("PATCH", "/config/database/pooler", { pool_mode: "session" })).status).toBe(400);
  });

  it("limits a just-in-time login to its allowed networks in pg_hba.conf", async () => {
    const { rows } = await strata.ctx.platformPool.query("select id::text from platform.users limit 1");
    const userId = rows[0].id as string;
    const jit = (cidr: string) =>
      api("PUT", "/database/jit", {
        user_id: userId,
        roles: [{ role: "postgres", allowed_networks: { allowed_cidrs: [{ cidr }] } }],
      });
    expect((await jit("10.0.0.0/8")).status).toBe(200);
    expect((await api("PUT", "/jit-access", { state: "enabled" })).status).toBe(200);
    const first = await api("POST", "/database/jit", { role: "postgres", rhost: "10.1.2.3" });
    expect(first.status).toBe(200);
    const login = { user: first.body.db_user, password: first.body.db_password };
    expect(await tryConnect(OTHER, login)).toMatch(/pg_hba\.conf rejects connection/);
    expect(await tryConnect("127.0.0.1", login)).toBe("connected");
    expect((await jit("127.0.0.2/32")).status).toBe(200);
    const second = await api("POST", "/database/jit", { role: "postgres", rhost: OTHER });
    expect(await tryConnect(OTHER, { user: second.body.db_user, password: second.body.db_password })).toBe(
      "connected",
    );
  });

  it("answers a pooler connection string that psql connects with, as a new project's db_pass", async () => {
    const created = await fetch(`http://127.0.0.1:${strata.port}/v1/projects`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "pooled", organization_slug: "default-org", db_pass: "pooled-Pass-123" }),
    }).then((r) => r.json() as Promise<any>);
    const ref = created.ref as string;
    let pooler: { connection_string: string; db_user: string }[] | undefined;
    for (let i = 0; i < 100 && !pooler; i++) {
      const res = await fetch(`http://127.0.0.1:${strata.port}/v1/projects/${ref}/config/database/pooler`, {
        headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}` },
      });
      const status = await fetch(`http://127.0.0.1:${strata.port}/v1/projects/${ref}`, {
        headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}` },
      }).then((r) => r.json() as Promise<any>);
      if (status.status === "ACTIVE_HEALTHY") pooler = (await res.json()) as typeof pooler;
      else await new Promise((r) => setTimeout(r, 100));
    }
    expect(pooler![0].db_user).toBe(`postgres_${ref}`);
    const url = pooler![0].connection_string.replace("[YOUR-PASSWORD]", "pooled-Pass-123");
    // The owner logs in with db_pass as soon as the project is answered as active.
    const out = await promisify(execFile)("psql", [url, "-tAc", "select current_user"])
      .then((r) => r.stdout)
      .catch((e: Error) => e.message);
    expect(out.trim()).toBe(`postgres_${ref}`);
  });
});

describe("pg_hba.conf rules", () => {
  it("intersects CIDR lists and renders a restricted project's lines", () => {
    expect(intersectCidrs(["10.0.0.0/8", "fd00::/8"], ["10.1.0.0/16", "192.168.0.0/16", "::/0"])).toEqual([
      "10.1.0.0/16",
      "fd00::/8",
    ]);
    const lines = renderAccessBlock([
      {
        database: "db1",
        restrictions: { dbAllowedCidrs: ["10.0.0.0/8"], dbAllowedCidrsV6: [] },
        sslEnforced: true,
        // Only single addresses become rules, in canonical form; anything else is left out.
        banned: ["10.9.9.9", "::ffff:10.8.8.8", "0.0.0.0/0", "all", "1.2.3.4 trust", "127.0.0.1"],
        loopbackBans: [
          { address: "127.0.0.1", user: "postgres_abc" },
          { address: "127.0.0.1", user: "authenticator" },
          { address: "10.1.1.1", user: "postgres_abc" },
          { address: "::1", user: 'x" trust' },
        ],
        jitLogins: [{ role: "jit_x", cidrs: ["10.2.0.0/16", "172.16.0.0/12"] }],
      },
    ]);
    const strata =
      '"postgres","authenticator","strata_log_reader",/^(strata_(sql|read|auth)|authenticator)_[a-z]{20}$';
    expect(lines.slice(2, -1)).toEqual([
      `host all ${strata} 127.0.0.1/32 scram-sha-256`,
      `host all ${strata} ::1/128 scram-sha-256`,
      "host replication +strata_replication 127.0.0.1/32 scram-sha-256",
      "host replication +strata_replication ::1/128 scram-sha-256",
      "# Tenant logins banned from loopback, then every other loopback connection",
      'host "db1" "postgres_abc" 127.0.0.1/32 reject',
      "host all all 127.0.0.1/32 scram-sha-256",
      "host all all ::1/128 scram-sha-256",
      'host "db1" all 10.9.9.9/32 reject',
      'host "db1" all 10.8.8.8/32 reject',
      'hostssl "db1" "jit_x" 10.2.0.0/16 scram-sha-256',
      'host "db1" "jit_x" all reject',
      'hostssl "db1" all 10.0.0.0/8 scram-sha-256',
      'host "db1" all all reject',
      "host all all all scram-sha-256",
    ]);
  });

  it("takes a single address, canonical, as a ban, and nothing else", () => {
    const valid: [string, string][] = [
      ["1.2.3.4", "1.2.3.4"],
      ["::ffff:1.2.3.4", "1.2.3.4"],
      ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
      ["127.0.0.1", "127.0.0.1"],
    ];
    for (const [value, canonical] of valid) expect(banAddress(value)).toBe(canonical);
    for (const value of [
      "0.0.0.0",
      "::",
      "0.0.0.0/0",
      "10.0.0.0/8",
      "1.2.3.4/32",
      "all",
      "samehost",
      "localhost",
      "1.2.3.4 trust",
      '"1.2.3.4"',
      "1.2.3.4\nhost all all all trust",
      "fe80::1%eth0",
      "127.1",
      "0x7f.0.0.1",
      "01.2.3.4",
      "255.255.255.255",
      "224.0.0.1",
      "",
    ])
      expect(banAddress(value)).toBeUndefined();
  });
});
