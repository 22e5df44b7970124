import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import net, { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import WebSocket from "ws";
import { testTempDir } from "../helpers/tempDir";

const ROOT = path.resolve(__dirname, "../..");

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

function postmasterAlive(dataDir: string): boolean {
  try {
    const pid = Number(readFileSync(path.join(dataDir, "pgdata", "postmaster.pid"), "utf8").split("\n")[0]);
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface Cli {
  child: ChildProcess;
  exited: Promise<number | null>;
  anonKey: string;
  serviceKey: string;
}

/** `npm start` as a user runs it, with an embedded PostgreSQL in its own data directory; keys from its banner. */
async function startCli(env: Record<string, string>): Promise<Cli> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "ignore"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const keys = await until(async () => {
    const anon = /anon key: (\S+)/.exec(out)?.[1];
    const service = /service_role key: (\S+)/.exec(out)?.[1];
    return anon !== undefined && service !== undefined && { anonKey: anon, serviceKey: service };
  }, 120_000).catch((e) => {
    child.kill("SIGKILL");
    throw e;
  });
  return { child, exited, ...keys };
}

/** Whether nothing listens on `port` any more (a refused connection). */
function refused(port: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

/**
 * A stop drains: SIGTERM with requests in flight lets each of them answer, realtime sockets get a close frame,
 * a request arriving meanwhile on an open connection answers 503 with `Connection: close`, and the process
 * stops PostgreSQL and exits 0. A second signal while it drains exits at once.
 */
describe("Stopping the server under load", () => {
  let dataDir: string;
  let env: Record<string, string>;
  let cli: Cli | undefined;

  const dbUrl = () => {
    const password = readFileSync(path.join(dataDir, "pg-superuser-password"), "utf8").trim();
    return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${env.STRATA_PG_PORT}/postgres`;
  };
  /** SQL as the cluster's superuser: the second channel, beside the HTTP answers. */
  const sql = async (text: string) => {
    const client = new pg.Client({ connectionString: dbUrl() });
    await client.connect();
    try {
      return (await client.query(text)).rows;
    } finally {
      await client.end();
    }
  };
  const sleepingBackends = async () =>
    Number((await sql("select count(*)::int as n from pg_stat_activity where wait_event = 'PgSleep'"))[0].n);
  /** An RPC that takes `seconds`. */
  const createNap = () =>
    sql(`create or replace function public.nap(seconds float8) returns int language plpgsql as
           $$ begin perform pg_sleep(seconds); return 1; end $$;
         grant execute on function public.nap(float8) to anon, service_role`);
  const nap = (key: string, seconds: number) =>
    fetch(`http://127.0.0.1:${env.PORT}/rest/v1/rpc/nap`, {
      method: "POST",
      headers: { apikey: key, "content-type": "application/json" },
      body: JSON.stringify({ seconds }),
    }).then(
      async (res) => ({ status: res.status, body: await res.json() }),
      (e: Error) => ({ status: 0, body: e.message }),
    );

  beforeAll(async () => {
    dataDir = testTempDir("strata-drain-");
    env = {
      STRATA_DATA_DIR: dataDir,
      PORT: String(await freePort()),
      STRATA_PG_PORT: String(await freePort()),
    };
  });

  afterEach(async () => {
    if (cli && cli.child.exitCode === null && cli.child.signalCode === null) {
      cli.child.kill("SIGKILL");
      await cli.exited;
    }
    cli = undefined;
  });

  it("lets requests in flight answer, closes websockets with 1001, and exits 0 with PostgreSQL stopped", async () => {
    cli = await startCli(env);
    const { child, exited, anonKey } = cli;
    await createNap();
    await until(async () => (await nap(anonKey, 0)).status === 200);

    // A realtime client, connected before the stop.
    const socket = new WebSocket(
      `ws://127.0.0.1:${env.PORT}/realtime/v1/websocket?apikey=${anonKey}&vsn=1.0.0`,
    );
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      socket.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    // A connection whose request is still on its way (headers not finished) when the stop begins.
    const late = net.connect(Number(env.PORT), "127.0.0.1");
    let lateAnswer = "";
    late.on("data", (chunk) => (lateAnswer += chunk.toString()));
    const lateClosed = new Promise((resolve) => late.once("close", resolve));
    await new Promise((resolve) => late.once("connect", resolve));
    late.write(`GET /rest/v1/ HTTP/1.1\r\nHost: 127.0.0.1\r\napikey: ${anonKey}\r\n`);

    // Requests of two seconds each, in flight (seen running in the database) when SIGTERM comes.
    const inFlight = Array.from({ length: 4 }, () => nap(anonKey, 2));
    await until(async () => (await sleepingBackends()) === 4, 10_000);
    const signalled = Date.now();
    child.kill("SIGTERM");

    // The server stops accepting at once; the realtime client gets its close frame, 1001 going away.
    await until(() => refused(env.PORT), 10_000);
    expect(await closed).toEqual({ code: 1001, reason: "server shutting down" });
    // The request that arrives now on the open connection: 503, and the connection closes.
    late.write("\r\n");
    await lateClosed;
    expect(lateAnswer).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
    expect(lateAnswer).toMatch(/\r\nConnection: close\r\n/i);
    expect(lateAnswer).toContain('{"message":"Server is shutting down; retry on another node"}');

    // Every request in flight got its answer.
    expect(await Promise.all(inFlight)).toEqual(Array(4).fill({ status: 200, body: 1 }));
    // Exit 0, well within the default grace (10 s) plus PostgreSQL's stop, and the postmaster is gone.
    expect(await exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(30_000);
    expect(postmasterAlive(dataDir)).toBe(false);
  }, 180_000);

  it("exits at once on a second signal while it drains", async () => {
    // A long grace: only the second signal ends this stop early.
    cli = await startCli({ ...env, SHUTDOWN_GRACE_MS: "120000" });
    const { child, exited, serviceKey } = cli;
    await createNap();
    await until(async () => (await nap(serviceKey, 0)).status === 200);
    // service_role has no statement timeout: this request would hold the drain for 25 s.
    const held = nap(serviceKey, 25);
    await until(async () => (await sleepingBackends()) === 1, 10_000);
    child.kill("SIGTERM");
    await until(() => refused(env.PORT), 10_000);
    // Draining: still running, waiting for the request.
    await sleep(500);
    expect(child.exitCode).toBeNull();
    const forcedAt = Date.now();
    child.kill("SIGTERM");
    expect(await exited).toBe(1);
    expect(Date.now() - forcedAt).toBeLessThan(10_000);
    expect((await held).status).toBe(0);
    // The process's exit stops its PostgreSQL (fast shutdown) as well.
    await until(async () => !postmasterAlive(dataDir), 30_000);
  }, 180_000);
});
