/**
 * Soak: `npm run soak -- --minutes N [--clients C]`. Starts Strata in a process of its own (embedded
 * PostgreSQL in a temporary directory, loopback only) and drives it for N minutes with a mix of GraphQL and
 * REST reads and writes as anon and as signed-in users, Management API calls, DDL changes, API key rotations
 * and project restarts. Prints requests, 5xx (split into those a restart explains and the rest), p99 per
 * kind, and the server's RSS over time; at the end, whether any database connection was left in a
 * transaction and how much RSS grew after warm-up.
 */
import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";
import { rssMb, startServerProcess, stopServerProcess } from "./process";

function argument(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const value = i === -1 ? undefined : Number(process.argv[i + 1]);
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

const MINUTES = argument("minutes", 1);
const CLIENTS = argument("clients", 8);
const PORT = argument("port", 54950);
const PG_PORT = argument("pg-port", 54951);
const TOKEN = "sbp_" + "50a4".repeat(8) + "01234567";
const JWT_SECRET = "soak-secret-" + randomUUID();
const BASE = `http://127.0.0.1:${PORT}`;

interface Tally {
  count: number;
  errors4xx: number;
  errors5xx: number;
  duringRestart5xx: number;
  latencies: number[];
  samples: string[];
}

const tallies = new Map<string, Tally>();
/** Until when a 503 is explained by a project restart the soak itself asked for. */
let restartingUntil = 0;

async function timed(kind: string, run: () => Promise<Response>): Promise<void> {
  const t = tallies.get(kind) ?? {
    count: 0,
    errors4xx: 0,
    errors5xx: 0,
    duringRestart5xx: 0,
    latencies: [],
    samples: [],
  };
  tallies.set(kind, t);
  const start = performance.now();
  let status = 0;
  let body: string;
  try {
    const res = await run();
    status = res.status;
    body = await res.text();
  } catch (e) {
    body = String(e);
  }
  t.count++;
  t.latencies.push(performance.now() - start);
  if (t.latencies.length > 50_000) t.latencies.splice(0, 25_000);
  if (status >= 400 && status < 500) {
    t.errors4xx++;
    if (t.samples.length < 3) t.samples.push(`${status} ${body.slice(0, 200)}`);
  }
  if (status >= 500 || status === 0) {
    if (status === 503 && Date.now() < restartingUntil) t.duringRestart5xx++;
    else {
      t.errors5xx++;
      if (t.samples.length < 3) t.samples.push(`${status} ${body.slice(0, 200)}`);
    }
  }
}

function mgmt(method: string, pathname: string, body?: unknown): Promise<Response> {
  return fetch(`${BASE}${pathname}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function sql(ref: string, query: string): Promise<unknown> {
  const res = await mgmt("POST", `/v1/projects/${ref}/database/query`, { query });
  if (!res.ok) throw new Error(`SQL failed (${res.status}): ${await res.text()}`);
  return res.json();
}

function userToken(sub: string): Promise<string> {
  return new SignJWT({ role: "authenticated", sub, aud: "authenticated" })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuedAt()
    .setExpirationTime("2h")
    .sign(new TextEncoder().encode(JWT_SECRET));
}

const pick = <T>(items: T[]): T => items[Math.floor(Math.random() * items.length)];

async function main() {
  const server = await startServerProcess({
    name: "strata-soak",
    port: PORT,
    pgPort: PG_PORT,
    jwtSecret: JWT_SECRET,
    managementToken: TOKEN,
  });
  const { ref, anonKey } = server;
  const pid = server.child.pid!;
  try {
    await sql(
      ref,
      `create table if not exists soak_items (id bigserial primary key, owner uuid not null default auth.uid(),
         title text not null, n int not null default 0);
       alter table soak_items enable row level security;
       drop policy if exists own on soak_items;
       create policy own on soak_items for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
       drop policy if exists anon_read on soak_items;
       create policy anon_read on soak_items for select to anon using (true);
       grant select on soak_items to anon;
       grant all on soak_items to authenticated;
       grant usage on sequence soak_items_id_seq to authenticated;`,
    );
    const users = await Promise.all(Array.from({ length: 4 }, () => userToken(randomUUID())));
    const rest = (key: string, jwt: string, p: string, init: RequestInit = {}) =>
      fetch(`${BASE}/rest/v1${p}`, {
        ...init,
        headers: {
          apikey: key,
          authorization: `Bearer ${jwt}`,
          "content-type": "application/json",
          ...init.headers,
        },
      });
    const graphql = (jwt: string, query: string, variables: object = {}) =>
      fetch(`${BASE}/graphql/v1`, {
        method: "POST",
        headers: { apikey: anonKey, authorization: `Bearer ${jwt}`, "content-type": "application/json" },
        body: JSON.stringify({ query, variables }),
      });

    const deadline = Date.now() + MINUTES * 60_000;
    const actions: [number, () => Promise<void>][] = [
      [
        20,
        () =>
          timed("rest read anon", () =>
            rest(anonKey, anonKey, "/soak_items?select=id,title,n&order=id.desc&limit=20"),
          ),
      ],
      [
        10,
        () => {
          const jwt = pick(users);
          return timed("rest insert user", () =>
            rest(anonKey, jwt, "/soak_items", {
              method: "POST",
              body: JSON.stringify({ title: `t${Math.random()}` }),
            }),
          );
        },
      ],
      [
        8,
        () =>
          timed("rest update user", () =>
            rest(anonKey, pick(users), "/soak_items?id=gt.0&n=lt.5", {
              method: "PATCH",
              body: JSON.stringify({ n: 5 }),
            }),
          ),
      ],
      [
        3,
        () =>
          timed("rest delete user", () =>
            rest(anonKey, pick(users), "/soak_items?n=eq.5&id=lt.100000", { method: "DELETE" }),
          ),
      ],
      [
        20,
        () =>
          timed("graphql read", () =>
            graphql(
              pick(users),
              "{ soakItemsCollection(first: 10, orderBy: [{id: DescNullsLast}]) { totalCount edges { node { id title n } } } }",
            ),
          ),
      ],
      [
        8,
        () =>
          timed("graphql insert", () =>
            graphql(
              pick(users),
              "mutation($t: String!) { insertIntoSoakItemsCollection(objects: [{title: $t}]) { affectedCount } }",
              { t: `g${Math.random()}` },
            ),
          ),
      ],
      [
        3,
        () =>
          timed("management read", () =>
            mgmt(
              "GET",
              pick([
                `/v1/projects/${ref}/api-keys`,
                `/v1/projects/${ref}/config/auth`,
                `/v1/projects/${ref}/postgrest`,
                `/v1/projects/${ref}`,
              ]),
            ),
          ),
      ],
    ];
    const total = actions.reduce((s, [w]) => s + w, 0);
    const client = async () => {
      while (Date.now() < deadline) {
        let r = Math.random() * total;
        const action = actions.find(([w]) => (r -= w) < 0)![1];
        await action();
      }
    };

    // Slow background changes: DDL every 5 s, a key rotation every 20 s, a project restart every 60 s.
    let ddlStep = 0;
    const ddl = setInterval(() => {
      const column = `extra_${ddlStep++ % 3}`;
      void timed("ddl", () =>
        mgmt("POST", `/v1/projects/${ref}/database/query`, {
          query:
            ddlStep % 2
              ? `alter table soak_items add column if not exists ${column} int`
              : `alter table soak_items drop column if exists ${column}`,
        }),
      );
    }, 5_000);
    const rotate = setInterval(() => {
      void timed("key rotation", async () => {
        const created = await mgmt("POST", `/v1/projects/${ref}/api-keys`, {
          type: "publishable",
          name: `soak_${Date.now()}`,
        });
        if (!created.ok) return created;
        const key = (await created.json()) as { id: string; api_key?: string };
        if (key.api_key) await rest(key.api_key, key.api_key, "/soak_items?limit=1");
        return mgmt("DELETE", `/v1/projects/${ref}/api-keys/${key.id}`);
      });
    }, 20_000);
    const restart = setInterval(() => {
      restartingUntil = Date.now() + 10_000;
      void timed("project restart", () => mgmt("POST", `/v1/projects/${ref}/restart`));
    }, 60_000);

    const rss: [number, number][] = [];
    const started = Date.now();
    const sampler = setInterval(() => {
      const mb = rssMb(pid);
      rss.push([(Date.now() - started) / 1000, mb]);
      const requests = [...tallies.values()].reduce((s, t) => s + t.count, 0);
      const errors = [...tallies.values()].reduce((s, t) => s + t.errors5xx, 0);
      console.log(
        `t=${((Date.now() - started) / 1000).toFixed(0)}s  requests ${requests}  5xx ${errors}  rss ${mb.toFixed(0)} MB`,
      );
    }, 10_000);

    await Promise.all(Array.from({ length: CLIENTS }, client));
    for (const timer of [ddl, rotate, restart, sampler]) clearInterval(timer);
    await new Promise((r) => setTimeout(r, 2000));

    const busy = (await sql(
      ref,
      `select count(*)::int as n from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and state in ('active', 'idle in transaction')`,
    )) as { n: number }[];

    console.log(`\nSoak: ${MINUTES} min, ${CLIENTS} clients\n`);
    console.log("kind                 requests   4xx   5xx  5xx in restart   p99 ms");
    for (const [kind, t] of [...tallies].sort()) {
      const sorted = [...t.latencies].sort((a, b) => a - b);
      const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
      console.log(
        `${kind.padEnd(20)} ${String(t.count).padStart(8)} ${String(t.errors4xx).padStart(5)} ${String(t.errors5xx).padStart(5)} ${String(t.duringRestart5xx).padStart(15)} ${p99.toFixed(1).padStart(8)}`,
      );
      for (const s of t.samples) console.log(`    ${s}`);
    }
    // Warm-up: the first fifth of the run, at least a minute (caches, schemas and pools filling).
    const warm = rss.filter(([t]) => t >= Math.max(60, (MINUTES * 60) / 5));
    const first = warm[0]?.[1] ?? rss[0]?.[1] ?? 0;
    const last = rss[rss.length - 1]?.[1] ?? 0;
    const unexplained = [...tallies.values()].reduce((s, t) => s + t.errors5xx, 0);
    console.log(
      `\nrequests ${[...tallies.values()].reduce((s, t) => s + t.count, 0)}, unexplained 5xx ${unexplained}, ` +
        `RSS after warm-up ${first.toFixed(0)} MB -> end ${last.toFixed(0)} MB (${first ? (((last - first) / first) * 100).toFixed(1) : "?"}%), ` +
        `connections left busy: ${busy[0]?.n ?? "?"}`,
    );
  } finally {
    await stopServerProcess(server);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
