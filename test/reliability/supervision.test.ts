import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  closeSync,
  openSync,
  readFileSync,
  rmSync,
  statfsSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import pg from "pg";
import pino from "pino";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { startEmbeddedPostgres, type ClusterState } from "../../src/db/embedded";
import { TEST_AUTHENTICATOR_PASSWORD } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until it answers something truthy. */
async function until<T>(probe: () => Promise<T | false | undefined>, ms = 60_000): Promise<T> {
  for (const end = Date.now() + ms; ;) {
    const value = await probe().catch(() => undefined);
    if (value) return value;
    if (Date.now() > end) throw new Error("gave up waiting");
    await sleep(100);
  }
}

const MB = 1024 * 1024;
/** The watermarks this file's server runs with (small: the volume is a small tmpfs). */
const WARN_MB = 96;
const REFUSE_MB = 48;

/**
 * The embedded cluster is supervised: a postmaster killed with -9 under load is restarted (crash recovery)
 * without restarting Strata, answering 503 meanwhile and losing no acknowledged write; one that cannot start
 * says why (log, /health) and is retried until the cause is gone; a nearly full volume refuses writes cleanly
 * and allows them again when space returns. This file runs Strata with an embedded cluster of its own, on a
 * small tmpfs of its own (mounted when the tests run as root) whose space the disk tests take away.
 */
describe("The embedded cluster under supervision", () => {
  let dir: string;
  let mounted = false;
  let strata: RunningStrata;
  let base: string;
  let anonKey: string;
  let admin: pg.Pool;
  const logged: { level: number; msg: string; reason?: string }[] = [];
  const realtime: SupabaseClient[] = [];

  const sql = (text: string, params?: unknown[]) => admin.query(text, params);
  const pgdata = () => path.join(dir, "pgdata");
  const postmasterPid = () =>
    Number(readFileSync(path.join(pgdata(), "postmaster.pid"), "utf8").split("\n")[0]);
  const health = async () => {
    const res = await fetch(`${base}/health`);
    return { status: res.status, body: await res.json() };
  };
  /** One REST insert as anon; 0 for an answer that never came (a hang) or a broken connection. */
  const insert = async (id: number): Promise<number> => {
    try {
      const res = await fetch(`${base}/rest/v1/items`, {
        method: "POST",
        headers: { apikey: anonKey, "content-type": "application/json", Prefer: "return=minimal" },
        body: JSON.stringify({ id }),
        signal: AbortSignal.timeout(20_000),
      });
      await res.arrayBuffer();
      return res.status;
    } catch {
      return 0;
    }
  };
  const downLines = () => logged.filter((l) => l.msg === "the embedded PostgreSQL is down; restarting it");

  /** Takes the volume's free space down to `leaveBytes` (or to nothing) with a file of its own. */
  function fill(leaveBytes: number): void {
    const fd = openSync(path.join(dir, "filler"), "a");
    const chunk = Buffer.alloc(MB);
    try {
      for (;;) {
        const { bavail, bsize } = statfsSync(dir);
        const left = bavail * bsize - leaveBytes;
        if (left <= 0) break;
        writeSync(fd, chunk, 0, Math.min(chunk.length, left));
      }
    } catch (e) {
      if ((e as { code?: string }).code !== "ENOSPC") throw e;
    } finally {
      closeSync(fd);
    }
  }
  const freeSpace = () => rmSync(path.join(dir, "filler"), { force: true });
  const freeMb = () => {
    const { bavail, bsize } = statfsSync(dir);
    return (bavail * bsize) / MB;
  };

  beforeAll(async () => {
    dir = testTempDir("strata-supervise-");
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=400m,mode=0755", "tmpfs", dir], { stdio: "pipe" });
      mounted = true;
    } catch {
      // Not root (or no mount in this container): the disk tests are skipped, with a note.
    }
    const log = pino({ level: "info" }, { write: (line: string) => logged.push(JSON.parse(line)) });
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(await freePort()),
        STRATA_DATA_DIR: dir,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        DISK_CHECK_MS: "200",
        DISK_WARN_FREE_MB: String(WARN_MB),
        DISK_REFUSE_FREE_MB: String(REFUSE_MB),
      }),
      log,
    );
    base = `http://127.0.0.1:${strata.port}`;
    anonKey = strata.info.anon_key;
    admin = new pg.Pool({ connectionString: strata.ctx.adminUrl, max: 2 });
    admin.on("error", () => {});
    await sql(`create table public.items (id bigint primary key);
               grant select, insert on public.items to anon;
               alter publication supabase_realtime add table public.items`);
    await until(async () => (await insert(-100)) === 201);
  }, 180_000);

  afterAll(async () => {
    for (const c of realtime) {
      await c.removeAllChannels();
      c.realtime.disconnect();
    }
    await admin?.end();
    await strata?.stop();
    if (mounted) execFileSync("umount", ["-l", dir]);
  });

  it("restarts a postmaster killed with -9 under load: 503s meanwhile, served again, no acknowledged write lost", async () => {
    // A realtime subscriber from before the crash: its changes stream over a replication connection.
    const client = createClient(base, anonKey, { auth: { persistSession: false, autoRefreshToken: false } });
    realtime.push(client);
    const received: number[] = [];
    const subscribed = new Promise<string>((resolve) =>
      client
        .channel("items")
        .on("postgres_changes", { event: "INSERT", schema: "public", table: "items" }, (p) =>
          received.push(Number(p.new.id)),
        )
        .on("system", {}, (p: { extension?: string; status?: string }) => {
          if (p.extension === "postgres_changes") resolve(p.status ?? "");
        })
        .subscribe(),
    );
    expect(await subscribed).toBe("ok");
    const startedBefore = (await sql("select pg_postmaster_start_time()::text as t")).rows[0].t;

    const answers: { id: number; status: number; sent: number }[] = [];
    let next = 1;
    let writing = true;
    const writer = async () => {
      while (writing) {
        const id = next++;
        const sent = Date.now();
        const status = await insert(id);
        answers.push({ id, status, sent });
        if (status !== 201) await sleep(20);
      }
    };
    const writers = Array.from({ length: 4 }, writer);
    const healthSeen: { status: number; body: any }[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        healthSeen.push(await health().catch(() => ({ status: 0, body: undefined })));
        await sleep(50);
      }
    })();

    await until(async () => answers.filter((a) => a.status === 201).length >= 50);
    const killedAt = Date.now();
    process.kill(postmasterPid(), "SIGKILL");
    const servedAgain = await until(
      async () => answers.find((a) => a.sent > killedAt && a.status === 201) ?? false,
      30_000,
    );
    // More writes after the restart, then the load stops.
    const ackedAtRestart = answers.filter((a) => a.status === 201).length;
    await until(async () => answers.filter((a) => a.status === 201).length >= ackedAtRestart + 50);
    writing = false;
    await Promise.all(writers);
    watching = false;
    await watcher;

    // Only successes and honest 503s: no 500, no hang.
    const statuses = new Set(answers.map((a) => a.status));
    expect([...statuses].sort()).toEqual([201, 503]);
    // Served again within the issue's bound, by the same Strata (this process), on a restarted postmaster.
    expect(servedAgain.sent - killedAt).toBeLessThan(15_000);
    const startedAfter = (await sql("select pg_postmaster_start_time()::text as t")).rows[0].t;
    expect(startedAfter).not.toBe(startedBefore);
    // Every acknowledged row is there (crash recovery replayed them).
    const acked = answers.filter((a) => a.status === 201).map((a) => a.id);
    const { rows } = await sql("select count(*)::int as n from public.items where id = any($1)", [acked]);
    expect(rows[0].n).toBe(acked.length);
    // /health said the database was restarting, and why, then served again.
    expect(healthSeen).toContainEqual({
      status: 503,
      body: {
        status: "database_restarting",
        database: "restarting",
        reason: "PostgreSQL was killed by SIGKILL",
      },
    });
    expect(await health()).toEqual({ status: 200, body: { status: "ok", database: "reachable" } });
    // One warning line for the outage, with the signal; one line when it ran again.
    expect(downLines()).toEqual([
      expect.objectContaining({ level: 40, reason: "PostgreSQL was killed by SIGKILL" }),
    ]);
    expect(logged.filter((l) => l.msg === "the embedded PostgreSQL runs again")).toHaveLength(1);

    // Long-lived connections came back: realtime's replication stream delivers a change made now...
    await sql("insert into public.items values (-1)");
    await until(async () => received.includes(-1));
    // ...and the DDL watch (a LISTEN) tells the REST schema cache about a table made now.
    await sql("create table public.later (id int); grant select on public.later to anon");
    await until(async () => {
      const res = await fetch(`${base}/rest/v1/later`, { headers: { apikey: anonKey } });
      return res.status === 200;
    });
  }, 120_000);

  it("says why a postmaster cannot start, on /health and in one log line, and starts it once the cause is gone", async () => {
    // A setting PostgreSQL refuses at start, as a damaged configuration would be.
    const autoConf = path.join(pgdata(), "postgresql.auto.conf");
    const good = readFileSync(autoConf, "utf8");
    appendFileSync(autoConf, "shared_buffers = 'plenty'\n");
    const linesBefore = downLines().length;
    process.kill(postmasterPid(), "SIGKILL");
    const down = await until(async () => {
      const h = await health();
      return h.body.reason?.includes("shared_buffers") && h;
    });
    expect(down).toEqual({
      status: 503,
      body: {
        status: "database_restarting",
        database: "restarting",
        reason: expect.stringContaining('invalid value for parameter "shared_buffers": "plenty"'),
      },
    });
    expect(await insert(-2)).toBe(503);
    // The failed starts are retried, but the same cause is logged once.
    await sleep(3000);
    const lines = downLines().slice(linesBefore);
    expect(lines.map((l) => l.reason)).toEqual([
      "PostgreSQL was killed by SIGKILL",
      expect.stringContaining('invalid value for parameter "shared_buffers": "plenty"'),
    ]);

    writeFileSync(autoConf, good);
    await until(async () => (await insert(-3)) === 201, 30_000);
    // The supervisor marks the cluster up once its own readiness probe answers, which may be a moment
    // after the first request got through.
    const up = await until(async () => {
      const h = await health();
      return h.status === 200 && h;
    }, 30_000);
    expect(up).toEqual({ status: 200, body: { status: "ok", database: "reachable" } });
  }, 120_000);

  const onTmpfs = () => {
    if (!mounted) console.warn("supervision.test.ts: the disk tests need root to mount a tmpfs; skipped");
    return mounted;
  };

  it("refuses writes cleanly while the volume is nearly full, and allows them again when space returns", async () => {
    if (!onTmpfs()) return;
    const ref = strata.info.ref;
    const token = strata.info.management_token!;
    const manage = (method: string, p: string, body?: unknown) =>
      fetch(`${base}/v1/projects/${ref}${p}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: await r.json() }));

    // Between the watermarks: a warning, and writes go on.
    fill(((WARN_MB + REFUSE_MB) / 2) * MB);
    await until(async () => logged.some((l) => l.msg === "the database's volume is running out of space"));
    expect(await insert(1_000_000)).toBe(201);
    expect((await health()).body.status).toBe("ok");

    fill((REFUSE_MB / 2) * MB);
    expect(freeMb()).toBeLessThan(REFUSE_MB);
    let attempt = 1_500_000;
    const refused = await until(async () => {
      const res = await fetch(`${base}/rest/v1/items`, {
        method: "POST",
        headers: { apikey: anonKey, "content-type": "application/json" },
        body: JSON.stringify({ id: attempt++ }),
      });
      return res.status !== 201 && { status: res.status, body: await res.json() };
    });
    // The read-only error, answered as a refused statement: not "database out of reach", not a 500.
    expect(refused).toEqual({
      status: 405,
      body: expect.objectContaining({
        code: "25006",
        message: expect.stringMatching(/^cannot execute \w+ in a read-only transaction$/),
      }),
    });
    const graphql = await fetch(`${base}/graphql/v1`, {
      method: "POST",
      headers: { apikey: anonKey, "content-type": "application/json" },
      body: JSON.stringify({
        query: 'mutation { insertIntoitemsCollection(objects: [{ id: "1500999" }]) { affectedCount } }',
      }),
    });
    expect({ status: graphql.status, body: await graphql.json() }).toEqual({
      status: 200,
      body: { data: null, errors: [{ message: expect.stringMatching(/in a read-only transaction$/) }] },
    });
    // Reads are served; /health says why writes are refused; the project's read-only state says it too.
    const read = await fetch(`${base}/rest/v1/items?id=eq.-100`, { headers: { apikey: anonKey } });
    expect(await read.json()).toEqual([{ id: -100 }]);
    expect(await health()).toEqual({
      status: 200,
      body: {
        status: "read_only",
        database: "reachable",
        reason: expect.stringMatching(
          /^only \d+ MB free on the database's volume: writes are refused until more than 96 MB are free$/,
        ),
      },
    });
    expect((await manage("GET", "/readonly")).body).toMatchObject({ enabled: true });
    // Strata's own superuser still writes (its control plane, its bookkeeping).
    await sql("insert into public.items values (1000002)");
    expect(logged).toContainEqual(
      expect.objectContaining({
        level: 50,
        msg: "the database's volume is nearly full: every project's writes are refused",
      }),
    );

    // The project's own read-only mode, turned on meanwhile, outlives the refusal's end.
    expect((await manage("PUT", "/readonly", { enabled: true })).status).toBe(200);
    freeSpace();
    await until(async () => (await health()).body.status === "ok");
    expect(await insert(1_000_003)).toBe(405);
    expect((await manage("PUT", "/readonly", { enabled: false })).body).toMatchObject({ enabled: false });
    await until(async () => (await insert(1_000_004)) === 201);
    const { rows } = await sql(
      "select id from public.items where id >= 1000000 and id < 1500000 order by id",
    );
    expect(rows).toEqual([{ id: "1000000" }, { id: "1000002" }, { id: "1000004" }]);
  }, 120_000);

  it("when a full disk stops PostgreSQL (a PANIC writing WAL), says why, and serves again once space is freed", async () => {
    if (!onTmpfs()) return;
    const linesBefore = downLines().length;
    await sql("insert into public.items values (3000001)");
    // Nothing left on the volume, then WAL to write: PostgreSQL panics, and its crash recovery cannot write.
    fill(0);
    await until(() =>
      sql("select pg_logical_emit_message(false, 'fill', repeat('x', 4000000))").then(
        () => false,
        () => true,
      ),
    );
    const down = await until(async () => {
      const h = await health();
      return h.body.reason?.includes("No space left on device") && h;
    });
    expect(down).toEqual({
      status: 503,
      body: {
        status: "database_restarting",
        database: "restarting",
        reason: expect.stringMatching(/could not write to file "pg_wal\/.*": No space left on device/),
      },
    });
    // Requests are answered 503 meanwhile, never 500; the cause is logged (once however often it recurs).
    expect(await insert(3_000_002)).toBe(503);
    const lines = downLines().slice(linesBefore);
    expect(lines[0].reason).toMatch(/^PostgreSQL exited with code 1 after: .*No space left on device$/);
    expect(new Set(lines.map((l) => l.reason?.replace(/\d+/g, "#"))).size).toBe(lines.length);

    freeSpace();
    await until(async () => (await insert(3_000_003)) === 201);
    expect(await health()).toEqual({ status: 200, body: { status: "ok", database: "reachable" } });
    const { rows } = await sql("select id from public.items where id > 3000000 order by id");
    expect(rows).toEqual([{ id: "3000001" }, { id: "3000003" }]);
  }, 180_000);
});

describe("A supervised cluster stopped while it is down", () => {
  it("is not started again, and what was said is the one exit", async () => {
    const dir = testTempDir("strata-supervise-stop-");
    const port = await freePort();
    const states: ClusterState[] = [];
    const db = await startEmbeddedPostgres(dir, port, { onState: (state) => states.push(state) });
    const pid = Number(readFileSync(path.join(dir, "pgdata", "postmaster.pid"), "utf8").split("\n")[0]);
    process.kill(pid, "SIGKILL");
    await until(async () => db.downReason() !== undefined);
    await db.stop();
    // Past the first restart's delay: nothing answers on the port.
    await sleep(2000);
    const client = new pg.Client({ connectionString: db.url });
    client.on("error", () => {});
    await expect(client.connect()).rejects.toMatchObject({ code: "ECONNREFUSED" });
    expect(states).toEqual([{ running: false, reason: "PostgreSQL was killed by SIGKILL", retryInMs: 500 }]);
  }, 60_000);
});
