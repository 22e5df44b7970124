import type { RealtimeChannel, SupabaseClient } from "@supabase/supabase-js";
import { SignJWT } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { clientFor, userToken } from "../rest/fixtures";

/**
 * Realtime's tokens and its Management API settings: an expired or refused access token closes the channel
 * with the platform's system error, `private_only` refuses public channels, and shutdown closes the project's
 * sockets and drops its replication slot (checked in pg_replication_slots).
 */

let server: TestServer;
const clients: SupabaseClient[] = [];

beforeAll(async () => {
  server = await startTestServer();
  await server.sql(`
    create table public.items (id int primary key);
    grant select on public.items to anon, authenticated, service_role;
    alter publication supabase_realtime add table public.items;`);
}, 60_000);

afterAll(async () => {
  for (const c of clients) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  await server.stop();
});

function client(): SupabaseClient {
  const c = clientFor(server);
  clients.push(c);
  return c;
}

function subscribe(channel: RealtimeChannel): Promise<{ status: string; err?: Error }> {
  return new Promise((resolve) => channel.subscribe((status, err) => resolve({ status, err })));
}

function systemMessage(channel: RealtimeChannel, status: string): Promise<any> {
  return new Promise((resolve) =>
    channel.on("system", {}, (p: { status?: string }) => {
      if (p.status === status) resolve(p);
    }),
  );
}

test("an access token that expires closes the channel with the platform's error", async () => {
  const token = await new SignJWT({ role: "authenticated", sub: "11111111-1111-4111-8111-111111111111" })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + 2)
    .sign(new TextEncoder().encode(server.jwtSecret));
  const c = client();
  c.realtime.setAuth(token);
  const channel = c.channel("expiring");
  const error = systemMessage(channel, "error");
  expect((await subscribe(channel)).status).toBe("SUBSCRIBED");
  expect(await error).toMatchObject({
    extension: "system",
    message: expect.stringMatching(/^Token has expired/),
  });
}, 20_000);

test("a refused token on join or on setAuth never subscribes / closes the channel", async () => {
  const c = client();
  c.realtime.setAuth("not.a.jwt");
  const refused = await subscribe(c.channel("refused"));
  expect(refused.status).toBe("CHANNEL_ERROR");
  expect(refused.err?.message).toBe("MalformedJWT: The token provided is not a valid JWT");

  const d = client();
  d.realtime.setAuth(await userToken(server, "22222222-2222-4222-8222-222222222222"));
  const channel = d.channel("later");
  const error = systemMessage(channel, "error");
  expect((await subscribe(channel)).status).toBe("SUBSCRIBED");
  const forged = await new SignJWT({ role: "authenticated" })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setExpirationTime("1h")
    .sign(new TextEncoder().encode("another-secret-of-at-least-32-characters"));
  await d.realtime.setAuth(forged);
  expect(await error).toMatchObject({
    extension: "system",
    message: "Failed to validate JWT signature",
  });
}, 20_000);

test("private_only refuses public channels until it is turned off", async () => {
  const path = `/v1/projects/${server.ref}/config/realtime`;
  expect((await mgmt(server, "PATCH", path, { body: { private_only: true } })).status).toBe(204);
  const refused = await subscribe(client().channel("public-room"));
  expect(refused.status).toBe("CHANNEL_ERROR");
  expect(refused.err?.message).toMatch(/PrivateOnly/);
  expect((await mgmt(server, "PATCH", path, { body: { private_only: false } })).status).toBe(204);
  expect((await subscribe(client().channel("public-room-2"))).status).toBe("SUBSCRIBED");
}, 20_000);

test("shutdown closes the project's sockets and drops its replication slot", async () => {
  const channel = client()
    .channel("changes")
    .on("postgres_changes", { event: "*", schema: "public", table: "items" }, () => {});
  const ready = systemMessage(channel, "ok");
  expect((await subscribe(channel)).status).toBe("SUBSCRIBED");
  await ready;
  const slots = () =>
    server
      .sql("select slot_name from pg_replication_slots where database = current_database()")
      .then((r) => r.rows.map((row) => row.slot_name));
  expect(await slots()).toEqual([expect.stringMatching(new RegExp(`^strata_rt_${server.ref}_`))]);
  const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/config/realtime/shutdown`);
  expect(res.status).toBe(204);
  const c = clients[clients.length - 1];
  await c.removeAllChannels();
  c.realtime.disconnect();
  expect(await slots()).toEqual([]);
}, 20_000);

test("payload size, bytes per second and suspend apply to the socket and the broadcast API; usage counts both", async () => {
  const path = `/v1/projects/${server.ref}/config/realtime`;
  const limits = { max_bytes_per_second: 100, max_payload_size_in_kb: 1 };
  expect((await mgmt(server, "PATCH", path, { body: limits })).status).toBe(204);
  const api = (messages: unknown[]) =>
    fetch(`${server.url}/realtime/v1/api/broadcast`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ messages }),
    });
  const message = (text: string) => ({ topic: "limits", event: "e", payload: { text } });
  try {
    // One message over max_payload_size_in_kb: 422 with the platform's per-message errors.
    const tooLarge = await api([message("x".repeat(2000))]);
    expect(tooLarge.status).toBe(422);
    expect(await tooLarge.json()).toEqual({
      errors: { messages: [{ payload: ["Payload size exceeds tenant limit"] }] },
    });
    // A batch whose payloads exceed max_bytes_per_second is refused whole; a small one is sent.
    const tooMuch = await api([message("y".repeat(60)), message("z".repeat(60))]);
    expect(tooMuch.status).toBe(429);
    expect(await tooMuch.json()).toEqual({
      message: "Too many messages to broadcast, please reduce the batch size",
    });

    const c = client();
    const channel = c.channel("limits", { config: { broadcast: { ack: true } } });
    expect((await subscribe(channel)).status).toBe("SUBSCRIBED");
    expect(await channel.send({ type: "broadcast", event: "e", payload: { text: "w".repeat(150) } })).toBe(
      "error",
    );
    // A presence payload over max_payload_size_in_kb closes the channel, as on the platform.
    const closed = systemMessage(channel, "error");
    void channel.track({ big: "v".repeat(2000) });
    expect(await closed).toMatchObject({ extension: "system", message: "Track message size exceeded" });

    expect((await mgmt(server, "PATCH", path, { body: { suspend: true } })).status).toBe(204);
    const suspended = await api([message("hi")]);
    expect(suspended.status).toBe(403);
    expect(await suspended.json()).toEqual({ message: "Tenant is suspended" });
  } finally {
    const defaults = { max_bytes_per_second: 100_000, max_payload_size_in_kb: 100, suspend: false };
    expect((await mgmt(server, "PATCH", path, { body: defaults })).status).toBe(204);
  }
  expect((await api([message("hi")])).status).toBe(202);

  // Sockets and broadcast API calls are the project's realtime requests in its usage.
  const counts = await mgmt(
    server,
    "GET",
    `/v1/projects/${server.ref}/analytics/endpoints/usage.api-counts?interval=1hr`,
  );
  const realtimeRequests = counts.body.result.reduce((n: number, r: any) => n + r.total_realtime_requests, 0);
  expect(realtimeRequests).toBeGreaterThanOrEqual(8);
}, 20_000);

test("connection_pool sizes the pool private channels are authorised on", async () => {
  await server.sql(`create policy "pool topics" on realtime.messages for select to anon
                      using ((select realtime.topic()) like 'pool-%')`);
  const path = `/v1/projects/${server.ref}/config/realtime`;
  expect((await mgmt(server, "PATCH", path, { body: { connection_pool: 1 } })).status).toBe(204);
  try {
    const c = client();
    const statuses = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((n) => subscribe(c.channel(`pool-${n}`, { config: { private: true } }))),
    );
    expect(statuses.map((s) => s.status)).toEqual(Array(6).fill("SUBSCRIBED"));
    // Six concurrent checks went through one connection.
    const { rows } = await server.sql(
      `select count(*)::int as n from pg_stat_activity
        where datname = current_database() and application_name = 'strata realtime authorization'`,
    );
    expect(rows[0].n).toBe(1);
  } finally {
    expect((await mgmt(server, "PATCH", path, { body: { connection_pool: 2 } })).status).toBe(204);
  }
}, 20_000);
