import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import path from "node:path";
import { createClient, type RealtimeChannel, type SupabaseClient } from "@supabase/supabase-js";
import * as tus from "tus-js-client";
import WebSocket from "ws";
import { HAPROXY } from "../setup/haproxy";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_JWT_SECRET,
  TEST_KEK,
  type TestServer,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { startS3Server, type S3TestServer } from "./s3Server";

/**
 * Three Strata nodes behind HAProxy (deploy/haproxy.cfg, as documented in README "Many nodes"): one control
 * database (the test's cluster), one S3-compatible bucket. The first node runs in this process, the other
 * two are processes of their own, so one can die for real (SIGKILL). Real clients talk to the proxy only;
 * the proxy's `X-Strata-Node` header tells which node answered. Effects are checked by SQL on the database
 * and by reading from a surviving node directly.
 */

const ROOT = path.resolve(__dirname, "../..");
const BUCKET = "strata-objects";

let s3: S3TestServer;
let first: TestServer;
const children: ChildProcess[] = [];
let proxy: ChildProcess;
let proxyUrl: string;
/** Each node's own URL, by the name the proxy gives it. */
const nodeUrls: Record<string, string> = {};
const clients: SupabaseClient[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Polls `check` until it holds (the test's own timeout bounds the wait). */
async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((r) => setTimeout(r, 100));
}

const healthy = (url: string) =>
  fetch(`${url}/health`).then(
    (r) => r.status === 200,
    () => false,
  );

function startNode(port: number): ChildProcess {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...s3.env,
      DATABASE_URL: first.dbUrl,
      PORT: String(port),
      JWT_SECRET: TEST_JWT_SECRET,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
      STRATA_KEK: TEST_KEK,
      STRATA_DATA_DIR: testTempDir("strata-node-"),
      LOG_LEVEL: "warn",
    },
    stdio: "ignore",
  });
  children.push(child);
  return child;
}

/** Status and answering node of `count` health requests through the proxy. */
async function proxyAnswers(count: number): Promise<string[]> {
  const answers: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${proxyUrl}/health`).catch(() => undefined);
    await res?.arrayBuffer();
    answers.push(`${res?.status} ${res?.headers.get("x-strata-node")}`);
  }
  return answers;
}

beforeAll(async () => {
  s3 = await startS3Server(BUCKET);
  first = await startTestServer(s3.env);
  // The table of the write load, made before the other nodes read the schema.
  await first.sql(`create table public.writes (id bigint generated always as identity primary key, body text unique not null);
    grant all on public.writes to service_role`);
  const ports = [await freePort(), await freePort()];
  for (const port of ports) startNode(port);
  nodeUrls.node1 = first.url;
  nodeUrls.node2 = `http://127.0.0.1:${ports[0]}`;
  nodeUrls.node3 = `http://127.0.0.1:${ports[1]}`;
  await until(async () => (await healthy(nodeUrls.node2)) && (await healthy(nodeUrls.node3)));

  const proxyPort = await freePort();
  proxyUrl = `http://127.0.0.1:${proxyPort}`;
  proxy = spawn(HAPROXY, ["-f", path.join(ROOT, "deploy/haproxy.cfg"), "-db"], {
    env: {
      ...process.env,
      STRATA_PROXY_BIND: `127.0.0.1:${proxyPort}`,
      STRATA_NODE1: new URL(nodeUrls.node1).host,
      STRATA_NODE2: new URL(nodeUrls.node2).host,
      STRATA_NODE3: new URL(nodeUrls.node3).host,
    },
    stdio: "ignore",
  });
  // Every node is up behind the proxy once round robin reaches all three.
  await until(async () => new Set(await proxyAnswers(3)).size === 3);
}, 180_000);

afterAll(async () => {
  for (const c of clients) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  proxy?.kill("SIGKILL");
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  await first?.stop();
  await s3?.stop();
});

/** A supabase-js client of the proxy; `sockets` gets the node of each realtime socket it opens. */
function clientOf(key: string, sockets: string[] = []): SupabaseClient {
  class RecordingSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      this.once("upgrade", (res) => sockets.push(String(res.headers["x-strata-node"])));
    }
  }
  const c = createClient(proxyUrl, key, {
    auth: { persistSession: false, autoRefreshToken: false },
    realtime: { transport: RecordingSocket as never },
  });
  clients.push(c);
  return c;
}

test("REST, auth and the Management API through the proxy, answered by every node", async () => {
  const service = clientOf(first.serviceKey);
  const served = new Set<string>();
  for (let i = 0; i < 3; i++) {
    const { error } = await service.from("writes").insert({ body: `rest-${i}` });
    expect(error).toBeNull();
  }
  const { data } = await service.from("writes").select("body").like("body", "rest-%").order("body");
  expect(data).toEqual([{ body: "rest-0" }, { body: "rest-1" }, { body: "rest-2" }]);

  // Sign-up on one node, sign-in on another: the user is one row of the project's auth.users.
  const email = `many-${randomUUID()}@example.com`;
  const anon = clientOf(first.anonKey);
  const signUp = await anon.auth.signUp({ email, password: "a-long-password-1" });
  expect(signUp.error).toBeNull();
  const signIn = await clientOf(first.anonKey).auth.signInWithPassword({
    email,
    password: "a-long-password-1",
  });
  expect(signIn.error).toBeNull();
  expect(signIn.data.user!.id).toBe(signUp.data.user!.id);
  const { rows } = await first.sql("select id from auth.users where email = $1", [email]);
  expect(rows.map((r) => r.id)).toEqual([signUp.data.user!.id]);

  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${proxyUrl}/v1/projects`, {
      headers: { authorization: `Bearer ${first.managementToken}` },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { id: string }[]).map((p) => p.id)).toContain(first.ref);
    served.add(res.headers.get("x-strata-node")!);
  }
  expect(served.size).toBeGreaterThan(1);
});

test("a resumable upload's chunks go to different nodes and become one object every node serves", async () => {
  const service = clientOf(first.serviceKey);
  expect((await service.storage.createBucket("uploads")).error).toBeNull();
  const data = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < data.length; i++) data[i] = (i * 7) % 253;
  const chunkNodes: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const upload = new tus.Upload(data, {
      endpoint: `${proxyUrl}/storage/v1/upload/resumable`,
      headers: { apikey: first.serviceKey, authorization: `Bearer ${first.serviceKey}` },
      chunkSize: 256 * 1024,
      retryDelays: [],
      metadata: { bucketName: "uploads", objectName: "big.bin", contentType: "application/octet-stream" },
      onAfterResponse(req, res) {
        if (req.getMethod() === "PATCH") chunkNodes.push(res.getHeader("x-strata-node") ?? "");
      },
      onSuccess: () => resolve(),
      onError: reject,
    });
    upload.start();
  });
  expect(chunkNodes).toHaveLength(4);
  expect(new Set(chunkNodes).size).toBeGreaterThan(1);
  const { rows } = await first.sql(
    "select (metadata->>'size')::int as size from storage.objects where bucket_id = 'uploads' and name = 'big.bin'",
  );
  expect(rows).toEqual([{ size: data.length }]);
  for (const url of Object.values(nodeUrls)) {
    const res = await fetch(`${url}/storage/v1/object/uploads/big.bin`, {
      headers: { apikey: first.serviceKey, authorization: `Bearer ${first.serviceKey}` },
    });
    expect(Buffer.from(await res.arrayBuffer()).equals(data)).toBe(true);
  }
});

function subscribe(channel: RealtimeChannel): Promise<string> {
  return new Promise((resolve) => channel.subscribe((status) => resolve(status)));
}

test("a broadcast reaches a subscriber connected to another node", async () => {
  const aNodes: string[] = [];
  const a = clientOf(first.anonKey, aNodes).channel("hall");
  expect(await subscribe(a)).toBe("SUBSCRIBED");
  // Round robin gives the next socket another node; a request between the two could give it the same one.
  const heard: unknown[] = [];
  const bNodes: string[] = [];
  let b: RealtimeChannel | undefined;
  do {
    if (b) await b.unsubscribe();
    b = clientOf(first.anonKey, bNodes)
      .channel("hall")
      .on("broadcast", { event: "hello" }, ({ payload }) => heard.push(payload));
    expect(await subscribe(b)).toBe("SUBSCRIBED");
  } while (bNodes.at(-1) === aNodes[0]);
  // A node starts listening for a project's cross-node messages when its first socket of the project joins,
  // without holding the join's reply until then (src/realtime/cluster.ts): sent again until one arrives.
  while (!heard.length) {
    expect(await a.send({ type: "broadcast", event: "hello", payload: { from: aNodes[0] } })).toBe("ok");
    await new Promise((r) => setTimeout(r, 200));
  }
  expect(heard[0]).toEqual({ from: aNodes[0] });
  expect(aNodes[0]).toMatch(/^node[123]$/);
  expect(bNodes.at(-1)).toMatch(/^node[123]$/);
});

test("a node killed mid-load loses no acknowledged write or upload, and the proxy keeps serving", async () => {
  const headers = { apikey: first.serviceKey, authorization: `Bearer ${first.serviceKey}` };
  await fetch(`${proxyUrl}/storage/v1/bucket`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ id: "load", name: "load" }),
  });
  const written: string[] = [];
  const uploaded: string[] = [];
  let afterKill = 0;
  let killed = false;
  let stop = false;
  const writer = async (w: number) => {
    for (let n = 0; !stop; n++) {
      const body = `load-${w}-${n}`;
      const ok = await fetch(`${proxyUrl}/rest/v1/writes`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ body }),
      }).then(
        (r) => r.status === 201,
        () => false,
      );
      if (ok) written.push(body);
      if (ok && killed) afterKill++;
    }
  };
  const uploader = async () => {
    for (let n = 0; !stop; n++) {
      const name = `file-${n}.txt`;
      const ok = await fetch(`${proxyUrl}/storage/v1/object/load/${name}`, {
        method: "POST",
        headers: { ...headers, "content-type": "text/plain" },
        body: `upload ${n} `.repeat(1000),
      }).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) uploaded.push(name);
      if (ok && killed) afterKill++;
    }
  };
  const load = Promise.all([writer(0), writer(1), writer(2), uploader()]);
  await until(() => written.length >= 30 && uploaded.length >= 5);
  children[1].kill("SIGKILL");
  killed = true;
  // Served on: the survivors take the load once the proxy finds the node gone.
  await until(() => afterKill >= 40);
  stop = true;
  await load;

  const { rows } = await first.sql("select body from public.writes where body like 'load-%'");
  const stored = new Set(rows.map((r) => r.body as string));
  expect(written.filter((body) => !stored.has(body))).toEqual([]);
  for (const name of uploaded) {
    const res = await fetch(`${nodeUrls.node2}/storage/v1/object/load/${name}`, { headers });
    expect(res.status).toBe(200);
    expect((await res.text()).startsWith(`upload ${name.slice(5, -4)} `)).toBe(true);
  }
  expect(new Set(await proxyAnswers(6))).toEqual(new Set(["200 node1", "200 node2"]));
});
