/**
 * Memory of one Strata node with many idle projects: `node --import tsx bench/nodeMemory.ts [--projects 100]
 * [--idle-ms 20000] [--compiled]`. Starts Strata in a process of its own (embedded PostgreSQL in a temporary
 * directory), creates the projects through the Management API, and prints the node's resident memory (RSS;
 * the PostgreSQL processes are not counted): at start, with the projects created and never used, after one
 * REST, one GraphQL and one auth request to each (every project open: pools, schema, auth), and once
 * `PROJECT_IDLE_MS` passed without requests (each open project gave its connections back). Every node of an
 * installation holds what it opened, so this is the figure per node.
 */
import http from "node:http";
import { argument, rssMb, startServerProcess, stopServerProcess } from "./process";

const PROJECTS = Number(argument("projects", "100"));
const IDLE_MS = Number(argument("idle-ms", "20000"));
const PORT = Number(argument("port", "54960"));
const PG_PORT = Number(argument("pg-port", "54961"));
const TOKEN = "sbp_" + "3e3e".repeat(8) + "01234567";
const BASE = `http://127.0.0.1:${PORT}`;
/** Projects created (and later opened) at once. */
const AT_ONCE = 4;

async function mgmt<T>(method: string, pathname: string, body?: unknown): Promise<T> {
  const res = await fetch(`${BASE}${pathname}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 400) throw new Error(`${method} ${pathname}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** A request at the project's host (`<ref>.localhost`); answers its status. */
function atProject(ref: string, pathname: string, apikey: string, body?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port: PORT,
        path: pathname,
        method: body ? "POST" : "GET",
        headers: { host: `${ref}.localhost`, apikey, "content-type": "application/json" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Runs `work` on every item, `AT_ONCE` at a time. */
async function eachAtOnce<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: AT_ONCE }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}

async function createProject(organization: string, i: number): Promise<string> {
  const { id } = await mgmt<{ id: string }>("POST", "/v1/projects", {
    name: `idle-${i}`,
    organization_slug: organization,
    db_pass: `idle-project-password-${i}`,
  });
  for (;;) {
    const { status } = await mgmt<{ status: string }>("GET", `/v1/projects/${id}`);
    if (status === "ACTIVE_HEALTHY") return id;
    if (status.endsWith("FAILED")) throw new Error(`project ${id}: ${status}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function openProject(ref: string): Promise<void> {
  const keys = await mgmt<{ name: string; api_key: string }[]>(
    "GET",
    `/v1/projects/${ref}/api-keys?reveal=true`,
  );
  const anon = keys.find((k) => k.name === "anon")!.api_key;
  const answers = [
    await atProject(ref, "/rest/v1/", anon),
    await atProject(ref, "/graphql/v1", anon, JSON.stringify({ query: "{ __typename }" })),
    await atProject(ref, "/auth/v1/settings", anon),
  ];
  if (answers.some((s) => s !== 200)) throw new Error(`project ${ref} answered ${answers.join(", ")}`);
}

/** RSS once the process settled (a few samples a second apart, the last one). */
async function settledRss(pid: number): Promise<number> {
  for (let i = 0; i < 3; i++) await new Promise((r) => setTimeout(r, 1000));
  return rssMb(pid);
}

async function main(): Promise<void> {
  process.env.PROJECT_IDLE_MS = String(IDLE_MS);
  const server = await startServerProcess({
    name: "strata-memory",
    port: PORT,
    pgPort: PG_PORT,
    jwtSecret: "memory-bench-secret-of-at-least-32-characters",
    managementToken: TOKEN,
    compiled: process.argv.includes("--compiled"),
  });
  const pid = server.child.pid!;
  const rows: [string, number][] = [];
  try {
    rows.push(["started (default project only)", await settledRss(pid)]);
    const [organization] = await mgmt<{ id: string }[]>("GET", "/v1/organizations");
    const refs: string[] = [];
    await eachAtOnce(
      Array.from({ length: PROJECTS }, (_, i) => i),
      async (i) => {
        refs.push(await createProject(organization.id, i));
      },
    );
    rows.push([`${PROJECTS} projects created, never used`, await settledRss(pid)]);
    await eachAtOnce(refs, openProject);
    rows.push([`${PROJECTS} projects opened (REST, GraphQL, auth each)`, await settledRss(pid)]);
    // The registry retires a project idle for PROJECT_IDLE_MS on its next sweep (every min(idle, 60 s)).
    await new Promise((r) => setTimeout(r, 2 * IDLE_MS + 1000));
    rows.push([`${PROJECTS} projects idle past PROJECT_IDLE_MS (${IDLE_MS} ms)`, await settledRss(pid)]);
  } finally {
    await stopServerProcess(server);
  }
  console.log(`Strata node RSS (${process.argv.includes("--compiled") ? "dist/" : "tsx"}):`);
  for (const [what, mb] of rows) console.log(`  ${what.padEnd(60)} ${mb.toFixed(0)} MB`);
}

void main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
