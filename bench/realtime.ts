/**
 * Realtime against its floor, each in a process of its own: `npm run bench:realtime [-- --sizes
 * 1,100,1000,10000 --change-sizes 1,100,1000 --seconds S --rate R --quick]`.
 *
 * Strata (`strata start` on an embedded PostgreSQL in a temporary directory), the floor
 * (bench/floors/realtime.mjs: a bare `ws` server relaying the same frames, and reading postgres changes from a
 * slot of its own with pg-logical-replication, no authorisation) and this process, whose `ws` clients speak
 * Phoenix vsn 1.0.0 to both. RLS is on: broadcast uses a private channel whose policies on realtime.messages
 * let the signed-in user read and write; postgres changes come from a table whose select policy keeps the
 * user's own rows.
 *
 * Broadcast fan-out, per N subscribers (one socket each): a publisher keeps WINDOW messages in flight (the
 * next goes when one reached every subscriber) for S seconds; deliveries a second and the p99 of send to
 * receipt. Postgres changes, per N subscribers (100 channels a socket): R inserts a second for S seconds;
 * deliveries a second and the p99 of commit to receipt.
 */
import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";
import pg from "pg";
import WebSocket from "ws";
import { withDatabase } from "../src/db/urls";
import { argument, serverNode, startServerProcess, stopServerProcess, type ServerProcess } from "./process";
import {
  flag,
  freePort,
  management,
  percentile,
  printTable,
  startHelper,
  stopHelper,
  type Row,
} from "./report";

const QUICK = flag("quick");
const SIZES = argument("sizes", QUICK ? "1,100" : "1,100,1000,10000")
  .split(",")
  .map(Number);
const CHANGE_SIZES = argument("change-sizes", QUICK ? "1,100" : "1,100,1000")
  .split(",")
  .map(Number);
const SECONDS = Number(argument("seconds", QUICK ? "1" : "5"));
const RATE = Number(argument("rate", "50"));
const WINDOW = 4;
/** Strata's port (its PostgreSQL's is the next); 0: free ones. */
const PORT = Number(argument("port", "0"));
const PER_SOCKET = 100;
/** Sockets opened (and joined) at a time. */
const JOIN_BATCH = 50;
const TOKEN = "sbp_" + "be0c".repeat(8) + "01234567";
const JWT_SECRET = "bench-secret-" + randomUUID();
const USER = "11111111-1111-4111-8111-111111111111";
const now = () => performance.timeOrigin + performance.now();

interface Target {
  url: string;
  token: string;
}

interface Frame {
  join_ref: string | null;
  ref: string | null;
  topic: string;
  event: string;
  payload: Record<string, any>;
}

/** A Phoenix socket: sends frames, hands every received frame to `onFrame`. */
async function connect(target: Target, onFrame: (f: Frame) => void): Promise<WebSocket> {
  const ws = new WebSocket(target.url);
  ws.on("message", (data) => onFrame(JSON.parse(data.toString())));
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  return ws;
}

let refs = 0;

/** Joins `topic` with `config`; resolves on the reply (and the postgres_changes system message if asked). */
function join(
  ws: WebSocket,
  target: Target,
  topic: string,
  config: Record<string, unknown>,
  waiters: Map<string, (f: Frame) => void>,
) {
  const ref = String(++refs);
  const changes = Array.isArray(config.postgres_changes) && config.postgres_changes.length > 0;
  return new Promise<void>((resolve, reject) => {
    let replied = false;
    waiters.set(`${topic}|${ref}`, (f) => {
      if (f.event === "phx_reply") {
        if (f.payload.status !== "ok")
          return reject(new Error(`join ${topic}: ${JSON.stringify(f.payload)}`));
        replied = true;
        if (!changes) resolve();
      } else if (f.event === "system" && f.payload.extension === "postgres_changes") {
        if (f.payload.status !== "ok")
          return reject(new Error(`postgres_changes ${topic}: ${f.payload.message}`));
        if (replied) resolve();
      }
    });
    ws.send(
      JSON.stringify({
        topic,
        event: "phx_join",
        ref,
        join_ref: ref,
        payload: { config, access_token: target.token },
      }),
    );
  });
}

/** Routes replies and system messages to the join waiting for them, the rest to `onData`. */
function router(onData: (f: Frame, at: number) => void) {
  const waiters = new Map<string, (f: Frame) => void>();
  const byTopic = new Map<string, (f: Frame) => void>();
  return {
    waiters,
    onFrame(f: Frame) {
      if (f.event === "phx_reply" && f.ref) {
        const w = waiters.get(`${f.topic}|${f.ref}`);
        if (w) {
          byTopic.set(f.topic, w);
          return w(f);
        }
      }
      if (f.event === "system") return byTopic.get(f.topic)?.(f);
      onData(f, now());
    },
  };
}

interface Measure {
  perSecond: number;
  p99: number;
  delivered: number;
  expected: number;
}

async function broadcastFanOut(target: Target, n: number): Promise<Measure> {
  const topic = "realtime:room";
  const config = { broadcast: { self: false, ack: false }, presence: { key: "" }, private: true };
  const latencies: number[] = [];
  const deliveries = new Map<number, number>();
  let measuring = false;
  let onComplete: (() => void) | undefined;
  const sockets: WebSocket[] = [];
  const record = (f: Frame, at: number) => {
    if (f.event !== "broadcast") return;
    const { i, t } = f.payload.payload as { i: number; t: number };
    if (measuring) latencies.push(at - t);
    const got = (deliveries.get(i) ?? 0) + 1;
    deliveries.set(i, got);
    if (got === n) {
      deliveries.delete(i);
      onComplete?.();
    }
  };
  try {
    for (let made = 0; made < n; made += JOIN_BATCH) {
      await Promise.all(
        Array.from({ length: Math.min(JOIN_BATCH, n - made) }, async () => {
          const r = router(record);
          const ws = await connect(target, r.onFrame);
          sockets.push(ws);
          await join(ws, target, topic, config, r.waiters);
        }),
      );
    }
    const pub = router(() => {});
    const publisher = await connect(target, pub.onFrame);
    sockets.push(publisher);
    await join(publisher, target, topic, config, pub.waiters);
    let sent = 0;
    const send = () =>
      publisher.send(
        JSON.stringify({
          topic,
          event: "broadcast",
          ref: null,
          join_ref: null,
          payload: { type: "broadcast", event: "tick", payload: { i: sent++, t: now() } },
        }),
      );
    // Warm-up: one message to everyone before the clock starts.
    await new Promise<void>((resolve) => {
      onComplete = resolve;
      send();
    });
    measuring = true;
    let completed = 0;
    const started = now();
    const end = started + SECONDS * 1000;
    await new Promise<void>((resolve) => {
      const stalled = setTimeout(resolve, SECONDS * 1000 + 30_000);
      onComplete = () => {
        completed++;
        if (now() < end) send();
        else if (completed === sent - 1) {
          clearTimeout(stalled);
          resolve();
        }
      };
      for (let k = 0; k < WINDOW; k++) send();
    });
    const elapsed = (now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    return {
      perSecond: latencies.length / elapsed,
      p99: percentile(latencies, 99),
      delivered: latencies.length,
      expected: (sent - 1) * n,
    };
  } finally {
    for (const ws of sockets) ws.terminate();
  }
}

async function changes(target: Target, n: number, admin: pg.Client): Promise<Measure> {
  const config = {
    broadcast: { self: false },
    presence: { key: "" },
    postgres_changes: [{ event: "INSERT", schema: "public", table: "bench" }],
    private: false,
  };
  const latencies: number[] = [];
  const warm = new Set<string>();
  let measuring = false;
  let lastAt = 0;
  const sockets: WebSocket[] = [];
  const record = (f: Frame, at: number) => {
    if (f.event !== "postgres_changes") return;
    if (!measuring) return void warm.add(f.topic);
    latencies.push(at - Date.parse(f.payload.data.commit_timestamp));
    lastAt = at;
  };
  try {
    for (let made = 0; made < n; made += PER_SOCKET) {
      const r = router(record);
      const ws = await connect(target, r.onFrame);
      sockets.push(ws);
      const count = Math.min(PER_SOCKET, n - made);
      await Promise.all(
        Array.from({ length: count }, (_, k) =>
          join(ws, target, `realtime:changes-${made + k}`, config, r.waiters),
        ),
      );
    }
    await admin.query("insert into public.bench (user_id, body) values ($1, 'warm-up')", [USER]);
    for (let i = 0; i < 600 && warm.size < n; i++) await new Promise((r) => setTimeout(r, 50));
    if (warm.size < n) throw new Error(`only ${warm.size} of ${n} subscribers received the warm-up row`);
    measuring = true;
    const started = now();
    const rows = Math.round(SECONDS * RATE);
    for (let i = 0; i < rows; i++) {
      const wait = started + (i * 1000) / RATE - now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await admin.query("insert into public.bench (user_id, body) values ($1, $2)", [USER, `row ${i}`]);
    }
    const expected = rows * n;
    for (let i = 0; i < 600 && latencies.length < expected; i++) await new Promise((r) => setTimeout(r, 50));
    latencies.sort((a, b) => a - b);
    return {
      perSecond: latencies.length / (Math.max(lastAt - started, 1) / 1000),
      p99: percentile(latencies, 99),
      delivered: latencies.length,
      expected,
    };
  } finally {
    for (const ws of sockets) ws.terminate();
  }
}

async function prepare(server: ServerProcess): Promise<{ admin: pg.Client; token: string }> {
  const mgmt = management(`http://127.0.0.1:${server.port}`, TOKEN);
  const [{ db }] = (await mgmt("POST", `/v1/projects/${server.ref}/database/query`, {
    query: "select current_database() as db",
  })) as { db: string }[];
  // The Management API's SQL role does not own the publication: the table is added (and written) by the
  // superuser over one connection of its own.
  const admin = new pg.Client({ connectionString: withDatabase(server.superuserUrl, db) });
  await admin.connect();
  await admin.query(
    `create table public.bench (id bigint generated always as identity primary key, user_id uuid not null,
       body text, created_at timestamptz not null default now());
     grant select on public.bench to authenticated;
     alter table public.bench enable row level security;
     create policy "own rows" on public.bench for select to authenticated using (user_id = auth.uid());
     alter publication supabase_realtime add table public.bench;
     create policy "room read" on realtime.messages for select to authenticated
       using ((select realtime.topic()) = 'room' and extension = 'broadcast');
     create policy "room write" on realtime.messages for insert to authenticated
       with check ((select realtime.topic()) = 'room' and extension = 'broadcast');`,
  );
  const largest = Math.max(...SIZES, ...CHANGE_SIZES);
  await mgmt("PATCH", `/v1/projects/${server.ref}/config/realtime`, {
    max_channels_per_client: PER_SOCKET,
    max_concurrent_users: largest + 100,
    max_joins_per_second: Math.max(100, largest * 2),
    max_events_per_second: 1_000_000,
    max_bytes_per_second: 1_000_000_000,
  });
  const token = await new SignJWT({ role: "authenticated", sub: USER, aud: "authenticated" })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuedAt()
    .setExpirationTime("2h")
    .sign(new TextEncoder().encode(JWT_SECRET));
  return { admin, token };
}

async function main() {
  const server = await startServerProcess({
    name: "strata-bench-realtime",
    port: PORT,
    pgPort: PORT + 1,
    jwtSecret: JWT_SECRET,
    managementToken: TOKEN,
    logLevel: process.env.LOG_LEVEL,
    echo: Boolean(process.env.BENCH_SERVER_LOG),
  });
  let admin: pg.Client | undefined;
  let floor: Awaited<ReturnType<typeof startHelper>> | undefined;
  try {
    const prepared = await prepare(server);
    admin = prepared.admin;
    const floorPort = await freePort();
    floor = await startHelper(serverNode(), [
      "bench/floors/realtime.mjs",
      String(floorPort),
      withDatabase(server.superuserUrl, (await admin.query("select current_database() as db")).rows[0].db),
    ]);
    const strata: Target = {
      url: `ws://127.0.0.1:${server.port}/realtime/v1/websocket?apikey=${server.anonKey}&vsn=1.0.0`,
      token: prepared.token,
    };
    const bare: Target = { url: `ws://127.0.0.1:${floorPort}/?vsn=1.0.0`, token: prepared.token };
    const rows: Row[] = [];
    const compare = (name: string, f: Measure, s: Measure) => {
      const counts = `${s.delivered}/${s.expected}`;
      rows.push({
        name: `${name} deliveries/s`,
        unit: "msg/s",
        floor: f.perSecond,
        strata: s.perSecond,
        better: "higher",
        target: 0.8,
      });
      rows.push({
        name: `${name} p99 (${counts})`,
        unit: "ms",
        floor: f.p99,
        strata: s.p99,
        better: "lower",
        target: 1.25,
      });
    };
    for (const n of SIZES) {
      const f = await broadcastFanOut(bare, n);
      const s = await broadcastFanOut(strata, n);
      compare(`broadcast ×${n}`, f, s);
    }
    for (const n of CHANGE_SIZES) {
      const f = await changes(bare, n, admin);
      const s = await changes(strata, n, admin);
      compare(`changes ×${n} @${RATE}/s`, f, s);
    }
    const met = printTable("realtime (RLS on; p99 target: Strata ≤ floor / 0.8)", rows);
    console.log(`\nrealtime: ${met ? "every target met" : "targets NOT met"}`);
  } finally {
    if (floor) await stopHelper(floor);
    await admin?.end().catch(() => {});
    await stopServerProcess(server);
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
