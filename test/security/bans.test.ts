import { readFileSync, rmSync } from "node:fs";
import http from "node:http";
import net, { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { TEST_AUTHENTICATOR_PASSWORD, TEST_MANAGEMENT_TOKEN } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

/**
 * Network bans come from the log of Strata's own cluster, so this file runs Strata with its own embedded
 * PostgreSQL. Project B's anonymous user writes forged "failed login" text into that log through every data
 * interface; project A's bans, pg_hba.conf and clients must not notice. Real failed logins still ban. The
 * machine may only have loopback: 127.0.0.2 and 127.0.0.3 stand for other hosts (not Strata's addresses).
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
const THIRD = "127.0.0.3";
/** What a forged ban would name: networks, keywords, names, rule text, and one valid address. */
const FORGED_ADDRESSES = [
  "0.0.0.0/0",
  "10.0.0.0/8",
  "all",
  "samehost",
  "db.example.com",
  "1.2.3.4 trust",
  '"quoted"',
  "1.2.3.4/32 trust\nhost all all 0.0.0.0/0 trust",
  "203.0.113.7",
];

describe("network bans read from the cluster's log", () => {
  let dir: string;
  let pgPort: number;
  let strata: RunningStrata;
  let superPassword: string;
  let refA: string;
  let dbA: string;
  let dbB: string;
  let anonA: string;
  const ownerPassword = "owner-A-password-1";
  const hbaFile = () => path.join(dir, "pgdata", "pg_hba.conf");

  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${strata.port}${p}`, {
      method,
      headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  /** A data request as B's anonymous user (B is the default project, served at the root). */
  const asAnonB = (
    p: string,
    init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) =>
    fetch(`http://127.0.0.1:${strata.port}${p}`, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { apikey: strata.info.anon_key, "content-type": "application/json", ...init.headers },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    }).then((r) => r.status);
  /** A data request to A's host as A's anonymous user: Strata's own `authenticator` login at work. */
  const asAnonA = (p: string): Promise<{ status: number; body: any }> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: "127.0.0.1",
          port: strata.port,
          path: p,
          headers: { host: `${refA}.localhost`, apikey: anonA },
        },
        (res) => {
          let text = "";
          res.on("data", (c) => (text += c));
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }),
          );
        },
      );
      req.on("error", reject);
      req.end();
    });

  /** Connects from `from` to `database`; answers "connected" or the server's error. */
  async function tryConnect(
    from: string,
    opts: { user: string; password: string; database: string },
  ): Promise<string> {
    const client = new pg.Client({
      host: "127.0.0.1",
      port: pgPort,
      user: opts.user,
      password: opts.password,
      database: opts.database,
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
      const { rows } = await client.query("select host(inet_client_addr()) as addr");
      expect(rows[0].addr).toBe(from);
      return "connected";
    } catch (e) {
      return (e as Error).message;
    } finally {
      await client.end().catch(() => {});
    }
  }
  const asOwnerA = (from: string, password = ownerPassword) =>
    tryConnect(from, { user: `postgres_${refA}`, password, database: dbA });
  const asSuperuser = (from: string, database = dbA) =>
    tryConnect(from, { user: "postgres", password: superPassword, database });

  async function failLogins(from: string, user: string, database = dbA, times = 5): Promise<void> {
    for (let i = 0; i < times; i++)
      expect(await tryConnect(from, { user, password: "wrong-password", database })).toMatch(
        /password authentication failed/,
      );
  }

  /** The stored bans of A, as the superuser reads them from the control plane. */
  async function storedBans(): Promise<{ banned?: string[]; users?: Record<string, string[]> }> {
    const { rows } = await strata.ctx.platformPool.query(
      "select value from platform.project_settings where project_ref = $1 and kind = 'network_bans'",
      [refA],
    );
    return rows[0]?.value ?? {};
  }
  const retrieve = async () =>
    (await api("POST", `/v1/projects/${refA}/network-bans/retrieve`)).body.banned_ipv4_addresses as string[];
  async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
    let value = await read();
    for (let i = 0; i < 200 && !done(value); i++) {
      await new Promise((r) => setTimeout(r, 100));
      value = await read();
    }
    return value;
  }
  /** The reject rules of the file on disk, as PostgreSQL itself parses it. */
  async function rejectRules(): Promise<{ database: string[]; user_name: string[]; address: string }[]> {
    const client = new pg.Client(strata.ctx.adminUrl);
    await client.connect();
    try {
      const { rows: errors } = await client.query("select * from pg_hba_file_rules where error is not null");
      expect(errors).toEqual([]);
      const { rows } = await client.query(
        "select database, user_name, address from pg_hba_file_rules where auth_method = 'reject' order by line_number",
      );
      return rows;
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    dir = testTempDir("strata-bans-");
    pgPort = await freePort();
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(pgPort),
        STRATA_DATA_DIR: dir,
        MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        STRATA_KEK: "test-key-encryption-key-of-at-least-32-chars",
        MANAGEMENT_RATE_LIMIT: "100000",
      }),
      createLogger("silent"),
    );
    superPassword = readFileSync(path.join(dir, "pg-superuser-password"), "utf8").trim();
    const created = await api("POST", "/v1/projects", {
      name: "victim",
      organization_slug: "default-org",
      db_pass: ownerPassword,
    });
    expect(created.status).toBe(201);
    refA = created.body.ref;
    await until(
      () => api("GET", `/v1/projects/${refA}`),
      (r) => r.body.status === "ACTIVE_HEALTHY",
    );
    const { rows } = await strata.ctx.platformPool.query(
      "select ref, database_name from platform.projects where ref = any($1)",
      [[refA, strata.info.ref]],
    );
    dbA = rows.find((r) => r.ref === refA).database_name;
    dbB = rows.find((r) => r.ref === strata.info.ref).database_name;
    const keys = await api("GET", `/v1/projects/${refA}/api-keys`);
    anonA = keys.body.find((k: { name: string }) => k.name === "anon").api_key;
    expect(
      (await api("POST", `/v1/projects/${refA}/database/query`, { query: "create table a_items (id int)" }))
        .status,
    ).toBe(201);
    await api("POST", `/v1/projects/${refA}/database/query`, {
      query: "grant select on a_items to anon; notify pgrst, 'reload schema'",
    });
    // B (the attacker's project) has a table and functions that write what they are given into the log.
    const setup = await api("POST", `/v1/projects/${strata.info.ref}/database/query`, {
      query: `
        create table items (id int primary key, name text);
        grant select on items to anon;
        create function echo(msg text) returns text language plpgsql stable as $$ begin raise exception '%', msg; end $$;
        create function echo_header() returns text language plpgsql stable as $$
          begin raise exception '%', current_setting('request.headers', true)::json->>'x-forged'; end $$;
        grant execute on function echo(text), echo_header() to anon;`,
    });
    expect(setup.status).toBe(201);
  }, 180_000);
  afterAll(async () => {
    await strata?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("records no ban from forged log text that project B's anonymous user sends through every interface", async () => {
    const user = `postgres_${refA}`;
    const failed = `password authentication failed for user "${user}"`;
    const forgeries = FORGED_ADDRESSES.flatMap((address) => [
      // The old unanchored pattern, a whole text-log line, and a whole jsonlog record.
      `host=${address} db=${dbA} FATAL:  ${failed}`,
      `2026-11-28 03:00:00.000 UTC [123] host=${address} db=${dbA} FATAL:  ${failed}`,
      JSON.stringify({
        timestamp: "2026-11-28 03:00:00.000 UTC",
        user,
        dbname: dbA,
        pid: 123,
        remote_host: address,
        error_severity: "FATAL",
        state_code: "28P01",
        message: failed,
        backend_type: "client backend",
      }),
    ]);
    const marker = `forged-${Date.now()}`;
    const withNewlines = `${marker}\n${forgeries.join("\n")}\n`;
    const oneLine = `${marker} ${forgeries.filter((f) => !f.includes("\n")).join(" ")}`;
    for (let i = 0; i < 6; i++)
      for (const payload of [withNewlines, oneLine]) {
        // A REST filter value (an integer column: the value is quoted in the error), an RPC argument, a
        // GraphQL string, and (one line only: HTTP has no newlines in headers) a header.
        expect(await asAnonB(`/rest/v1/items?id=eq.${encodeURIComponent(payload)}`)).toBe(400);
        expect(await asAnonB("/rest/v1/rpc/echo", { body: { msg: payload } })).toBe(400);
        expect(
          await asAnonB("/graphql/v1", { body: { query: `{ echo(msg: ${JSON.stringify(payload)}) }` } }),
        ).toBe(200);
        expect(
          await asAnonB("/rest/v1/rpc/echo_header", { body: {}, headers: { "x-forged": oneLine } }),
        ).toBe(400);
      }
    // Failed logins to A's database from loopback under names that are no login (rule text, quotes, newlines),
    // and as Strata's own logins: never counted.
    for (const name of [
      `x" all 0.0.0.0/0 trust`,
      "u\nhost all all 0.0.0.0/0 trust",
      "authenticator",
      "postgres",
    ])
      await failLogins("127.0.0.1", name, dbA, 6);
    // A database name with rule text: no project's.
    await failLogins(OTHER, user, `${dbA}" all 0.0.0.0/0 trust`, 6);

    // The forged text did reach the log: as B's records, whole, newlines and all.
    const logged = await until(
      async () =>
        (
          await strata.ctx.platformPool.query(
            `select event_message, metadata->'parsed'->>'database_name' as db from platform.log_events
              where source = 'postgres_logs' and event_message like $1`,
            [`%${marker}%`],
          )
        ).rows,
      (rows) => rows.length >= 24,
    );
    expect(logged.length).toBeGreaterThanOrEqual(24);
    expect(new Set(logged.map((r) => r.db))).toEqual(new Set([dbB]));
    expect(
      logged.some((r) => r.event_message.includes(`\n2026-11-28 03:00:00.000 UTC [123] host=0.0.0.0/0`)),
    ).toBe(true);

    // Real failures after them: the log has been read past the forgeries once this ban is recorded.
    await failLogins(OTHER, user);
    expect(await until(retrieve, (list) => list.includes(OTHER))).toEqual([OTHER]);
    await strata.ctx.access!.apply();
    expect(await storedBans()).toMatchObject({ banned: [OTHER], users: {} });
    expect(await rejectRules()).toEqual([{ database: [dbA], user_name: ["all"], address: OTHER }]);
    const hba = readFileSync(hbaFile(), "utf8");
    const block = hba.slice(hba.indexOf("# BEGIN Strata"), hba.indexOf("# END Strata"));
    for (const forged of ["0.0.0.0/0", "trust", "samehost", "example.com", "203.0.113.7", "quoted"])
      expect(block).not.toContain(forged);
    // A's clients: its owner from this machine and from elsewhere, the superuser, A's data API.
    expect(await asOwnerA("127.0.0.1")).toBe("connected");
    expect(await asOwnerA(THIRD)).toBe("connected");
    expect(await asSuperuser(THIRD)).toBe("connected");
    expect(await asOwnerA(OTHER)).toMatch(/pg_hba\.conf rejects connection/);
    expect((await asAnonA("/rest/v1/a_items")).status).toBe(200);

    expect(
      (await api("DELETE", `/v1/projects/${refA}/network-bans`, { ipv4_addresses: [OTHER] })).status,
    ).toBe(200);
    expect(await retrieve()).toEqual([]);
    expect(await rejectRules()).toEqual([]);
    expect(await asOwnerA(OTHER)).toBe("connected");
  });

  it("bans a tenant login guessed from loopback, for that login only: Strata's own connections keep working", async () => {
    const user = `postgres_${refA}`;
    await failLogins("127.0.0.1", user);
    expect(await until(retrieve, (list) => list.includes("127.0.0.1"))).toEqual(["127.0.0.1"]);
    await strata.ctx.access!.apply();
    expect(await storedBans()).toMatchObject({ banned: ["127.0.0.1"], users: { "127.0.0.1": [user] } });
    expect(await rejectRules()).toEqual([{ database: [dbA], user_name: [user], address: "127.0.0.1" }]);
    // The banned login, with its right password, from loopback: refused; from another address: fine.
    expect(await asOwnerA("127.0.0.1")).toMatch(/pg_hba\.conf rejects connection/);
    expect(await asOwnerA(OTHER)).toBe("connected");
    // Strata's own logins from loopback: the superuser, the data login (A's REST), A's SQL and read-only logins.
    expect(await asSuperuser("127.0.0.1")).toBe("connected");
    expect((await asAnonA("/rest/v1/a_items")).status).toBe(200);
    for (const read_only of [false, true])
      expect(
        (await api("POST", `/v1/projects/${refA}/database/query`, { query: "select 1 as one", read_only }))
          .body,
      ).toEqual([{ one: 1 }]);
    // Other projects' tenants on loopback are not touched.
    expect(await tryConnect("127.0.0.1", { user, password: ownerPassword, database: dbB })).not.toMatch(
      /pg_hba\.conf rejects/,
    );

    expect(
      (await api("DELETE", `/v1/projects/${refA}/network-bans`, { ipv4_addresses: ["127.0.0.1"] })).status,
    ).toBe(200);
    expect(await retrieve()).toEqual([]);
    expect(await storedBans()).toMatchObject({ banned: [], users: {} });
    expect(await asOwnerA("127.0.0.1")).toBe("connected");
  });

  it("drops bans an older version stored that are not single addresses; each listed one is removable", async () => {
    await strata.ctx.platformPool.query(
      `insert into platform.project_settings (project_ref, kind, value) values ($1, 'network_bans', $2)
       on conflict (project_ref, kind) do update set value = excluded.value`,
      [
        refA,
        {
          banned: [
            "0.0.0.0/0",
            "all",
            "samehost",
            "1.2.3.4 trust",
            "host\nlocal all all trust",
            "127.0.0.1",
            "::ffff:198.51.100.4",
          ],
          expires_at: {},
        },
      ],
    );
    // Any rewrite (here: lifting a ban nobody has) writes a file PostgreSQL reads, and drops those entries.
    expect(
      (await api("DELETE", `/v1/projects/${refA}/network-bans`, { ipv4_addresses: ["192.0.2.1"] })).status,
    ).toBe(200);
    expect(await rejectRules()).toEqual([{ database: [dbA], user_name: ["all"], address: "198.51.100.4" }]);
    expect((await storedBans()).banned).toEqual(["::ffff:198.51.100.4"]);
    expect(await retrieve()).toEqual(["198.51.100.4"]);
    expect(await asOwnerA("127.0.0.1")).toBe("connected");

    for (const bad of ["0.0.0.0/0", "all", "db.example.com", "1.2.3.4 trust"]) {
      const res = await api("DELETE", `/v1/projects/${refA}/network-bans`, { ipv4_addresses: [bad] });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/single IP address/);
    }
    expect(
      (await api("DELETE", `/v1/projects/${refA}/network-bans`, { ipv4_addresses: ["198.51.100.4"] })).status,
    ).toBe(200);
    expect(await retrieve()).toEqual([]);
    expect((await storedBans()).banned).toEqual([]);
    expect(await rejectRules()).toEqual([]);
  });

  it("keeps postgres_logs whole and without quoted passwords", async () => {
    const marker = `pw-${Date.now()}`;
    const failed = await api("POST", `/v1/projects/${strata.info.ref}/database/query`, {
      query: `alter role no_such_role_${marker.replace("-", "_")} password 'hunter2-secret'`,
    });
    expect(failed.status).toBe(400);
    const rows = await until(
      async () =>
        (
          await strata.ctx.platformPool.query(
            `select event_message, metadata->'parsed'->>'error_severity' as severity from platform.log_events
              where source = 'postgres_logs' and event_message like $1 order by id`,
            [`%${marker.replace("-", "_")}%`],
          )
        ).rows,
      (r) => r.length >= 2,
    );
    expect(rows.map((r) => r.severity)).toEqual(["ERROR", "STATEMENT"]);
    expect(rows[1].event_message).toContain("password '********'");
    expect(JSON.stringify(rows)).not.toContain("hunter2");
  });
});
