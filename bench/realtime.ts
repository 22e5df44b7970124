/**
 * Realtime fan-out: `npm run bench:realtime [-- --seconds S --rate R --sizes 1,100,1000]`. Starts Strata in a
 * process of its own (embedded PostgreSQL in a temporary directory, loopback only), creates an RLS table in
 * the publication supabase_realtime, and for each N opens N postgres_changes subscribers with the platform's
 * JavaScript client (one signed-in user, so one claims group; 100 channels per socket), inserts R rows a
 * second for S seconds and prints, per N, the change-to-delivery latency p50/p99 (receipt time minus the
 * payload's commit_timestamp, both on this machine's clock) and the deliveries a second the subscribers got.
 * BENCH_SERVER_LOG=1 copies the server's output (LOG_LEVEL) to stderr.
 */
import { randomUUID } from "node:crypto";
import { createClient, type RealtimeChannel, type SupabaseClient } from "@supabase/supabase-js";
import { SignJWT } from "jose";
import pg from "pg";
import { withDatabase } from "../src/db/urls";
import { argument, startServerProcess, stopServerProcess, type ServerProcess } from "./process";

const SECONDS = Number(argument("seconds", "5"));
const RATE = Number(argument("rate", "20"));
const SIZES = argument("sizes", "1,100,1000").split(",").map(Number);
const PORT = Number(argument("port", "54960"));
const PG_PORT = Number(argument("pg-port", "54961"));
/** Channels per socket (the server's max_channels_per_client is raised to fit). */
const PER_SOCKET = 100;
const TOKEN = "sbp_" + "be0c".repeat(8) + "01234567";
const JWT_SECRET = "bench-secret-" + randomUUID();
const BASE = `http://127.0.0.1:${PORT}`;
const USER = "11111111-1111-4111-8111-111111111111";

async function mgmt(method: string, pathname: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${BASE}${pathname}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${pathname} failed (${res.status}): ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : undefined;
}

const sql = (ref: string, query: string) => mgmt("POST", `/v1/projects/${ref}/database/query`, { query });

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function subscribe(channel: RealtimeChannel): Promise<void> {
  return new Promise((resolve, reject) => {
    channel.on("system", {}, (p: { extension?: string; status?: string; message?: string }) => {
      if (p.extension !== "postgres_changes") return;
      if (p.status === "ok") resolve();
      else reject(new Error(`postgres_changes refused: ${p.message}`));
    });
    channel.subscribe((status, err) => {
      if (status !== "SUBSCRIBED") reject(err ?? new Error(`channel ${status}`));
    });
  });
}

interface Result {
  n: number;
  rows: number;
  expected: number;
  delivered: number;
  p50: number;
  p99: number;
  perSecond: number;
}

async function run(server: ServerProcess, admin: pg.Client, token: string, n: number): Promise<Result> {
  const clients: SupabaseClient[] = [];
  const latencies: number[] = [];
  let delivered = 0;
  let lastAt = 0;
  let measuring = false;
  const warm = new Set<number>();
  try {
    for (let made = 0; made < n;) {
      const c = createClient(BASE, server.anonKey, {
        auth: { persistSession: false, autoRefreshToken: false },
      });
      clients.push(c);
      await c.realtime.setAuth(token);
      const count = Math.min(PER_SOCKET, n - made);
      await Promise.all(
        Array.from({ length: count }, (_, k) => {
          const id = made + k;
          return subscribe(
            c
              .channel(`bench-${n}-${id}`)
              .on("postgres_changes", { event: "INSERT", schema: "public", table: "bench" }, (p) => {
                const at = Date.now();
                if (!measuring) {
                  warm.add(id);
                  return;
                }
                latencies.push(at - Date.parse(p.commit_timestamp));
                delivered++;
                lastAt = at;
              }),
          );
        }),
      );
      made += count;
    }
    // A first row reaches every subscriber before the clock starts.
    await admin.query("insert into public.bench (user_id, body) values ($1, 'warm-up')", [USER]);
    for (let i = 0; i < 600 && warm.size < n; i++) await new Promise((r) => setTimeout(r, 50));
    if (warm.size < n) throw new Error(`only ${warm.size} of ${n} subscribers received the warm-up row`);
    measuring = true;

    const started = Date.now();
    const rows = Math.round(SECONDS * RATE);
    for (let i = 0; i < rows; i++) {
      // Steady rate: each insert is sent at its slot, whatever the previous one took.
      const wait = started + (i * 1000) / RATE - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await admin.query("insert into public.bench (user_id, body) values ($1, $2)", [USER, `row ${i}`]);
    }
    const expected = rows * n;
    // Deliveries still under way get up to 30 s; whatever is missing then is reported.
    for (let i = 0; i < 600 && delivered < expected; i++) await new Promise((r) => setTimeout(r, 50));
    latencies.sort((a, b) => a - b);
    return {
      n,
      rows,
      expected,
      delivered,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      perSecond: delivered / (Math.max(lastAt - started, 1) / 1000),
    };
  } finally {
    for (const c of clients) {
      await c.removeAllChannels();
      c.realtime.disconnect();
    }
  }
}

async function main() {
  const server = await startServerProcess({
    name: "strata-bench-realtime",
    port: PORT,
    pgPort: PG_PORT,
    jwtSecret: JWT_SECRET,
    managementToken: TOKEN,
    logLevel: process.env.LOG_LEVEL,
    echo: Boolean(process.env.BENCH_SERVER_LOG),
  });
  let admin: pg.Client | undefined;
  try {
    // The Management API's SQL role does not own the publication: the table is added (and written) by the
    // superuser over one connection of its own.
    const [{ db }] = (await sql(server.ref, "select current_database() as db")) as { db: string }[];
    admin = new pg.Client({ connectionString: withDatabase(server.superuserUrl, db) });
    await admin.connect();
    await admin.query(
      `create table public.bench (id bigint generated always as identity primary key, user_id uuid not null,
         body text, created_at timestamptz not null default now());
       grant select on public.bench to authenticated;
       alter table public.bench enable row level security;
       create policy "own rows" on public.bench for select to authenticated using (user_id = auth.uid());
       alter publication supabase_realtime add table public.bench;`,
    );
    const largest = Math.max(...SIZES);
    await mgmt("PATCH", `/v1/projects/${server.ref}/config/realtime`, {
      max_channels_per_client: PER_SOCKET,
      max_concurrent_users: Math.max(200, Math.ceil(largest / PER_SOCKET) * 2),
      max_joins_per_second: Math.max(100, largest * 2),
    });
    const token = await new SignJWT({ role: "authenticated", sub: USER, aud: "authenticated" })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuedAt()
      .setExpirationTime("2h")
      .sign(new TextEncoder().encode(JWT_SECRET));

    console.log(
      `realtime postgres_changes: ${RATE} inserts/s for ${SECONDS} s, one claims group (RLS), ${PER_SOCKET} channels per socket`,
    );
    const results: Result[] = [];
    for (const n of SIZES) results.push(await run(server, admin, token, n));
    const pad = (s: string | number, w: number) => String(s).padStart(w);
    console.log(
      `${pad("subscribers", 11)} ${pad("sockets", 7)} ${pad("rows", 5)} ${pad("delivered", 14)} ${pad("p50 ms", 7)} ${pad("p99 ms", 7)} ${pad("deliveries/s", 12)}`,
    );
    for (const r of results) {
      console.log(
        `${pad(r.n, 11)} ${pad(Math.ceil(r.n / PER_SOCKET), 7)} ${pad(r.rows, 5)} ${pad(`${r.delivered}/${r.expected}`, 14)} ${pad(r.p50, 7)} ${pad(r.p99, 7)} ${pad(Math.round(r.perSecond), 12)}`,
      );
    }
  } finally {
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
