import { createClient, type RealtimeChannel, type SupabaseClient } from "@supabase/supabase-js";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { startTestServer, TEST_JWT_SECRET, TEST_KEK, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { testTempDir } from "../helpers/tempDir";

/**
 * Two Strata nodes of one installation (one database): a broadcast sent to one node reaches a subscriber
 * of the other (LISTEN/NOTIFY), each node reads postgres_changes through a slot of its own, and
 * max_concurrent_users counts the sockets of both.
 */

let server: TestServer;
let second: RunningStrata;
const clients: SupabaseClient[] = [];

beforeAll(async () => {
  // Nodes beat every half second, so each soon knows the others' socket counts.
  server = await startTestServer({ REALTIME_NODE_TIMEOUT_MS: "1500" });
  second = await startStrata(
    loadConfig({
      DATABASE_URL: server.dbUrl,
      PORT: "0",
      JWT_SECRET: TEST_JWT_SECRET,
      AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
      STRATA_KEK: TEST_KEK,
      REALTIME_NODE_TIMEOUT_MS: "1500",
      STRATA_DATA_DIR: testTempDir("strata-node2-"),
    }),
    createLogger("silent"),
  );
  await server.sql(`
    create table public.ticks (id int primary key);
    grant select on public.ticks to anon;
    alter publication supabase_realtime add table public.ticks;`);
}, 60_000);

afterAll(async () => {
  for (const c of clients) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  await second.stop();
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

test("a broadcast crosses nodes; each node streams changes from its own slot", async () => {
  const onSecond = clientOf(`http://127.0.0.1:${second.port}`);
  const onFirst = clientOf(server.url);
  const got: unknown[] = [];
  const burst: number[] = [];
  const arrived = new Promise<void>((resolve) => {
    const listener = onSecond
      .channel("shared")
      .on("broadcast", { event: "hello" }, (p) => {
        got.push(p.payload);
        resolve();
      })
      .on("broadcast", { event: "burst" }, (p) => burst.push(p.payload.n));
    void subscribe(listener).then((s) => expect(s).toBe("SUBSCRIBED"));
  });
  const sender = onFirst.channel("shared");
  expect(await subscribe(sender)).toBe("SUBSCRIBED");
  // The listener's join may still be on its way: send until it has arrived.
  for (let i = 0; got.length === 0 && i < 50; i++) {
    await sender.send({ type: "broadcast", event: "hello", payload: { from: "first" } });
    await Promise.race([arrived, new Promise((r) => setTimeout(r, 100))]);
  }
  expect(got[0]).toEqual({ from: "first" });
  // Sent at once (several may cross in one NOTIFY): every one arrives, in the order sent.
  await Promise.all(
    Array.from({ length: 30 }, (_, n) => sender.send({ type: "broadcast", event: "burst", payload: { n } })),
  );
  while (burst.length < 30) await new Promise((r) => setTimeout(r, 50));
  expect(burst).toEqual(Array.from({ length: 30 }, (_, n) => n));

  const changes: Record<string, unknown[]> = { first: [], second: [] };
  const ready = (c: SupabaseClient, name: "first" | "second") =>
    new Promise<void>((resolve) => {
      const ch = c
        .channel(`ticks-${name}`)
        .on("postgres_changes", { event: "INSERT", schema: "public", table: "ticks" }, (p) =>
          changes[name].push(p.new),
        )
        .on("system", {}, (p: { extension?: string }) => p.extension === "postgres_changes" && resolve());
      void subscribe(ch);
    });
  await Promise.all([ready(onFirst, "first"), ready(onSecond, "second")]);
  const slots = await server.sql(
    "select count(*)::int as n from pg_replication_slots where database = current_database()",
  );
  expect(slots.rows[0].n).toBe(2);
  await server.sql("insert into public.ticks values (1)");
  while (changes.first.length + changes.second.length < 2) await new Promise((r) => setTimeout(r, 50));
  expect(changes).toEqual({ first: [{ id: 1 }], second: [{ id: 1 }] });
}, 30_000);

test("max_concurrent_users counts the sockets of every node", async () => {
  for (const c of clients.splice(0)) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  const total = async () =>
    (await server.sql("select coalesce(sum(connections), 0)::int as n from _strata.realtime_nodes")).rows[0]
      .n;
  while ((await total()) !== 0) await new Promise((r) => setTimeout(r, 100));
  const path = `/v1/projects/${server.ref}/config/realtime`;
  expect((await mgmt(server, "PATCH", path, { body: { max_concurrent_users: 1 } })).status).toBe(204);
  try {
    const first = clientOf(server.url);
    expect(await subscribe(first.channel("cap"))).toBe("SUBSCRIBED");
    while ((await total()) !== 1) await new Promise((r) => setTimeout(r, 100));
    // The second node learns the first's count on its next beat: join until it refuses.
    const onSecond = clientOf(`http://127.0.0.1:${second.port}`);
    let refusal: string | undefined;
    for (let n = 0; !refusal; n++) {
      refusal = await new Promise<string | undefined>((resolve) =>
        onSecond
          .channel(`cap-${n}`)
          .subscribe((status, err) => resolve(status === "SUBSCRIBED" ? undefined : err?.message)),
      );
      if (!refusal) await new Promise((r) => setTimeout(r, 100));
    }
    expect(refusal).toBe("ConnectionRateLimitReached: Too many connected users");
  } finally {
    expect((await mgmt(server, "PATCH", path, { body: { max_concurrent_users: 200 } })).status).toBe(204);
  }
}, 30_000);
