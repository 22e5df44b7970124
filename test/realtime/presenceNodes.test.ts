import { spawn, type ChildProcess } from "node:child_process";

import { createServer } from "node:net";
import path from "node:path";
import { createClient, type RealtimeChannel, type SupabaseClient } from "@supabase/supabase-js";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_JWT_SECRET,
  TEST_KEK,
  type TestServer,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

/**
 * Presence shared by two Strata nodes on one database: the second node is a process of its own, so it can
 * die for real (SIGKILL). A joiner on either node sees the other's presences, track and untrack arrive as
 * join/leave, and a dead node's presences leave the survivor's state once its heartbeat is too old.
 */

const ROOT = path.resolve(__dirname, "../..");
/** Both nodes take a node silent for 3 s for dead (the default is 15 s). */
const NODE_TIMEOUT_MS = "3000";

let server: TestServer;
let child: ChildProcess | undefined;
let childUrl: string;
const clients: SupabaseClient[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  server = await startTestServer({ REALTIME_NODE_TIMEOUT_MS: NODE_TIMEOUT_MS });
  const port = await freePort();
  childUrl = `http://127.0.0.1:${port}`;
  child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: server.dbUrl,
      PORT: String(port),
      JWT_SECRET: TEST_JWT_SECRET,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
      STRATA_KEK: TEST_KEK,
      STRATA_DATA_DIR: testTempDir("strata-node-b-"),
      REALTIME_NODE_TIMEOUT_MS: NODE_TIMEOUT_MS,
      LOG_LEVEL: "warn",
    },
    stdio: "ignore",
  });
  for (let i = 0; i < 240; i++) {
    const ok = await fetch(`${childUrl}/health`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error("the second node did not become healthy");
}, 90_000);

afterAll(async () => {
  for (const c of clients) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  if (child && child.exitCode === null) child.kill("SIGKILL");
  await server.stop();
});

function clientOf(url: string): SupabaseClient {
  const c = createClient(url, server.anonKey, { auth: { persistSession: false, autoRefreshToken: false } });
  clients.push(c);
  return c;
}

function subscribe(channel: RealtimeChannel): Promise<string> {
  return new Promise((resolve) => channel.subscribe((status) => resolve(status)));
}

/** Waits until `check` holds (the test's own timeout bounds the wait). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 50));
}

const usersOf = (channel: RealtimeChannel) =>
  Object.entries(channel.presenceState())
    .flatMap(([key, metas]) => metas.map((m) => `${key}:${(m as unknown as { user: string }).user}`))
    .sort();

test("presence crosses nodes: state on join, track, untrack, and a dead node's presences leave", async () => {
  const leaves: string[] = [];
  const onA = clientOf(server.url)
    .channel("room", { config: { presence: { key: "ann" } } })
    .on("presence", { event: "sync" }, () => {})
    .on("presence", { event: "leave" }, ({ key }) => leaves.push(key));
  expect(await subscribe(onA)).toBe("SUBSCRIBED");
  expect(await onA.track({ user: "ann" })).toBe("ok");

  // Bob joins on the other node: his presence_state holds Ann, tracked on the first node.
  const onB = clientOf(childUrl)
    .channel("room", { config: { presence: { key: "bob" } } })
    .on("presence", { event: "sync" }, () => {});
  expect(await subscribe(onB)).toBe("SUBSCRIBED");
  await until(() => usersOf(onB).includes("ann:ann"));
  expect(await onB.track({ user: "bob" })).toBe("ok");
  await until(() => usersOf(onA).length === 2 && usersOf(onB).length === 2);
  expect(usersOf(onA)).toEqual(["ann:ann", "bob:bob"]);
  expect(usersOf(onB)).toEqual(["ann:ann", "bob:bob"]);

  // A later joiner on the first node gets Bob in its state.
  const late = clientOf(server.url)
    .channel("room", { config: { presence: { key: "cy" } } })
    .on("presence", { event: "sync" }, () => {});
  expect(await subscribe(late)).toBe("SUBSCRIBED");
  await until(() => usersOf(late).length === 2);
  expect(usersOf(late)).toEqual(["ann:ann", "bob:bob"]);

  // Untrack on the second node is a leave on the first; a re-track (new payload) a join again.
  expect(await onB.untrack()).toBe("ok");
  await until(() => usersOf(onA).length === 1);
  expect(leaves.filter((k) => k === "bob")).toEqual(["bob"]);
  expect(await onB.track({ user: "bob-again" })).toBe("ok");
  await until(() => usersOf(onA).includes("bob:bob-again"));

  // A payload larger than NOTIFY carries still crosses (relayed through a row).
  const big = "x".repeat(20_000);
  expect(await late.track({ user: "cy", big })).toBe("ok");
  await until(() =>
    (onB.presenceState().cy ?? []).some((m) => (m as unknown as { big?: string }).big === big),
  );

  const rows = await server.sql("select key from _strata.realtime_presences order by key");
  expect(rows.rows.map((r) => r.key)).toEqual(["ann", "bob", "cy"]);

  // The second node dies without a word: the first removes Bob once its heartbeat is too old.
  child!.kill("SIGKILL");
  await until(() => usersOf(onA).length === 2 && usersOf(late).length === 2);
  expect(usersOf(onA)).toEqual(["ann:ann", "cy:cy"]);
  expect(usersOf(late)).toEqual(["ann:ann", "cy:cy"]);
  expect(leaves.filter((k) => k === "bob")).toEqual(["bob", "bob"]);
  const after = await server.sql(
    "select (select count(*)::int from _strata.realtime_presences) as presences, (select count(*)::int from _strata.realtime_nodes) as nodes",
  );
  expect(after.rows[0]).toEqual({ presences: 2, nodes: 1 });
}, 60_000);
