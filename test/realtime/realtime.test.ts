import type { RealtimeChannel, SupabaseClient } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { clientFor, userToken } from "../rest/fixtures";

/**
 * /realtime/v1 through the platform's JavaScript client (supabase.channel): postgres_changes checked
 * against each subscriber's role and claims, broadcast over the socket and the HTTP API, presence, and a
 * change written while the replication connection restarts. Rows are written with SQL (a second channel).
 */

const USER_A = "11111111-1111-4111-8111-111111111111";
const USER_B = "22222222-2222-4222-8222-222222222222";

let server: TestServer;
const clients: SupabaseClient[] = [];

beforeAll(async () => {
  server = await startTestServer();
  await server.sql(`
    create table public.notes (id int primary key, user_id uuid not null, body text);
    grant select on public.notes to anon, authenticated, service_role;
    alter table public.notes enable row level security;
    create policy "own notes" on public.notes for select to authenticated using (user_id = auth.uid());
    create table public.events (id int primary key, kind text);
    grant select on public.events to anon, authenticated, service_role;
    create table public.cards (id int primary key, title text, secret text);
    revoke all on public.cards from anon;
    grant select (id, title) on public.cards to anon;
    create table public.vault (id int primary key, code text);
    revoke all on public.vault from anon;
    alter publication supabase_realtime add table public.notes, public.events, public.cards, public.vault;`);
}, 60_000);

afterAll(async () => {
  for (const c of clients) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  await server.stop();
});

function client(key = server.anonKey): SupabaseClient {
  const c = clientFor(server, key);
  clients.push(c);
  return c;
}

/** A stream of events a listener received, with a way to wait for the n-th one. */
function collector<T>() {
  const items: T[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  return {
    items,
    push(item: T) {
      items.push(item);
      for (const w of waiters.filter((w) => items.length >= w.n)) w.resolve();
    },
    until(n: number): Promise<T[]> {
      return items.length >= n
        ? Promise.resolve(items)
        : new Promise((resolve) => waiters.push({ n, resolve: () => resolve(items) }));
    },
  };
}

/** Subscribes and resolves with the final status (SUBSCRIBED, CHANNEL_ERROR, TIMED_OUT or CLOSED). */
function subscribe(channel: RealtimeChannel): Promise<string> {
  return new Promise((resolve) => channel.subscribe((status) => resolve(status)));
}

/** Subscribes a channel with postgres_changes and waits for the server's "Subscribed to PostgreSQL". */
async function subscribeChanges(channel: RealtimeChannel): Promise<void> {
  const ready = new Promise<unknown>((resolve) =>
    channel.on("system", {}, (p: { extension?: string; status?: string }) => {
      if (p.extension === "postgres_changes") resolve(p);
    }),
  );
  expect(await subscribe(channel)).toBe("SUBSCRIBED");
  expect(await ready).toMatchObject({ status: "ok", message: "Subscribed to PostgreSQL" });
}

test("each signed-in user receives only the rows RLS lets them read; anon receives none", async () => {
  const received = { a: collector<any>(), b: collector<any>(), anon: collector<any>() };
  for (const [who, sub] of [
    ["a", USER_A],
    ["b", USER_B],
    ["anon", undefined],
  ] as const) {
    const c = client();
    if (sub) c.realtime.setAuth(await userToken(server, sub));
    const channel = c
      .channel(`notes-${who}`)
      .on("postgres_changes", { event: "INSERT", schema: "public", table: "notes" }, (p) =>
        received[who].push(p),
      );
    await subscribeChanges(channel);
  }
  await server.sql(`insert into public.notes values (1, '${USER_A}', 'a1'), (2, '${USER_B}', 'b1')`);
  await server.sql(`insert into public.notes values (3, '${USER_A}', 'a2')`);
  // A public table written after the notes: anon's and b's streams are complete once it has arrived.
  const marker = collector<any>();
  const watcher = client()
    .channel("marker")
    .on("postgres_changes", { event: "INSERT", schema: "public", table: "events" }, (p) => marker.push(p));
  await subscribeChanges(watcher);
  await server.sql("insert into public.events values (1, 'done')");
  await marker.until(1);

  const a = await received.a.until(2);
  expect(a.map((p) => p.new)).toEqual([
    { id: 1, user_id: USER_A, body: "a1" },
    { id: 3, user_id: USER_A, body: "a2" },
  ]);
  expect(a[0]).toMatchObject({ schema: "public", table: "notes", eventType: "INSERT", old: {} });
  expect(typeof a[0].commit_timestamp).toBe("string");
  expect((await received.b.until(1)).map((p) => p.new.id)).toEqual([2]);
  expect(received.b.items).toHaveLength(1);
  expect(received.anon.items).toHaveLength(0);
}, 30_000);

test("subscribers of one topic with different claims each get only their rows (a frame per claims group)", async () => {
  // Two sockets of user A, one of user B, anon and service_role, all on the same topic: a change's frame is
  // encoded once per claims group and shared by that group's subscribers only.
  const who = [
    ["a1", USER_A],
    ["a2", USER_A],
    ["b", USER_B],
    ["anon", undefined],
    ["service", undefined],
  ] as const;
  const got = new Map<string, ReturnType<typeof collector<any>>>();
  for (const [name, sub] of who) {
    const c = client(name === "service" ? server.serviceKey : server.anonKey);
    if (sub) c.realtime.setAuth(await userToken(server, sub));
    const events = collector<any>();
    got.set(name, events);
    await subscribeChanges(
      c
        .channel("notes-shared")
        .on("postgres_changes", { event: "INSERT", schema: "public", table: "notes" }, (p) => events.push(p))
        .on("postgres_changes", { event: "INSERT", schema: "public", table: "events" }, (p) =>
          events.push(p),
        ),
    );
  }
  await server.sql(`insert into public.notes values (40, '${USER_A}', 'a'), (41, '${USER_B}', 'b')`);
  await server.sql(`insert into public.notes values (42, '${USER_B}', 'b2')`);
  // A public row last: each stream is complete once it arrived (one socket delivers in commit order).
  await server.sql("insert into public.events values (40, 'marker')");
  const rows = async (name: string) => {
    const events = got.get(name)!;
    while (!events.items.some((p) => p.table === "events")) await events.until(events.items.length + 1);
    return events.items.map((p) => `${p.table}:${p.new.id}`);
  };
  expect(await rows("a1")).toEqual(["notes:40", "events:40"]);
  expect(await rows("a2")).toEqual(["notes:40", "events:40"]);
  expect(await rows("b")).toEqual(["notes:41", "notes:42", "events:40"]);
  expect(await rows("anon")).toEqual(["events:40"]);
  expect(await rows("service")).toEqual(["notes:40", "notes:41", "notes:42", "events:40"]);
  expect(got.get("b")!.items[0].new).toEqual({ id: 41, user_id: USER_B, body: "b" });
}, 30_000);

test("updates and deletes keep the order of a transaction; filters pick rows", async () => {
  const all = collector<any>();
  const filtered = collector<any>();
  const c = client(server.serviceKey);
  await subscribeChanges(
    c
      .channel("events-all")
      .on("postgres_changes", { event: "*", schema: "public", table: "events" }, (p) => all.push(p)),
  );
  await subscribeChanges(
    c
      .channel("events-filtered")
      .on(
        "postgres_changes",
        { event: "INSERT", schema: "public", table: "events", filter: "kind=in.(b,c)" },
        (p) => filtered.push(p),
      ),
  );
  await server.sql(`begin;
    insert into public.events values (10, 'a'), (11, 'b');
    update public.events set kind = 'c' where id = 10;
    delete from public.events where id = 11;
    commit;`);
  const got = await all.until(4);
  expect(got.map((p) => [p.eventType, p.new.id ?? p.old.id])).toEqual([
    ["INSERT", 10],
    ["INSERT", 11],
    ["UPDATE", 10],
    ["DELETE", 11],
  ]);
  expect(got[2].old).toEqual({ id: 10 });
  expect((await filtered.until(1)).map((p) => p.new)).toEqual([{ id: 11, kind: "b" }]);
}, 30_000);

test("a change written while the replication connection restarts is still delivered", async () => {
  const got = collector<any>();
  await subscribeChanges(
    client()
      .channel("restart")
      .on("postgres_changes", { event: "INSERT", schema: "public", table: "events" }, (p) => got.push(p)),
  );
  const killed = await server.sql(
    "select pg_terminate_backend(active_pid) as ok from pg_replication_slots where database = current_database() and active",
  );
  expect(killed.rows).toEqual([{ ok: true }]);
  await server.sql("insert into public.events values (20, 'while restarting')");
  expect((await got.until(1))[0].new).toEqual({ id: 20, kind: "while restarting" });
}, 30_000);

test("broadcast reaches the other clients (self and ack on request) and comes from the HTTP API", async () => {
  const a = client();
  const b = client();
  const mine = collector<any>();
  const theirs = collector<any>();
  const sender = a
    .channel("room", { config: { broadcast: { self: true, ack: true } } })
    .on("broadcast", { event: "cursor" }, (p) => mine.push(p));
  const receiver = b.channel("room").on("broadcast", { event: "cursor" }, (p) => theirs.push(p));
  expect(await subscribe(sender)).toBe("SUBSCRIBED");
  expect(await subscribe(receiver)).toBe("SUBSCRIBED");
  expect(await sender.send({ type: "broadcast", event: "cursor", payload: { x: 1 } })).toBe("ok");
  expect((await theirs.until(1))[0]).toEqual({ type: "broadcast", event: "cursor", payload: { x: 1 } });
  expect((await mine.until(1))[0].payload).toEqual({ x: 1 });

  const res = await fetch(`${server.url}/realtime/v1/api/broadcast`, {
    method: "POST",
    headers: { apikey: server.serviceKey, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ topic: "room", event: "cursor", payload: { x: 2 } }] }),
  });
  expect(res.status).toBe(202);
  expect((await theirs.until(2))[1].payload).toEqual({ x: 2 });

  const bad = await fetch(`${server.url}/realtime/v1/api/broadcast`, {
    method: "POST",
    headers: { apikey: "not-a-key", "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ topic: "room", event: "cursor", payload: {} }] }),
  });
  expect(bad.status).toBe(401);
  const malformed = await fetch(`${server.url}/realtime/v1/api/broadcast`, {
    method: "POST",
    headers: { apikey: server.serviceKey, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ event: "cursor" }] }),
  });
  expect(malformed.status).toBe(400);
}, 30_000);

test("presence: track and untrack reach the other members' presenceState", async () => {
  const watcherClient = client();
  const trackerClient = client();
  const joins = collector<any>();
  const leaves = collector<any>();
  const watcher = watcherClient
    .channel("lobby")
    .on("presence", { event: "join" }, (p) => joins.push(p))
    .on("presence", { event: "leave" }, (p) => leaves.push(p));
  const tracker = trackerClient.channel("lobby", { config: { presence: { key: "ann" } } });
  expect(await subscribe(watcher)).toBe("SUBSCRIBED");
  expect(await subscribe(tracker)).toBe("SUBSCRIBED");
  expect(await tracker.track({ status: "online" })).toBe("ok");
  expect((await joins.until(1))[0]).toMatchObject({ key: "ann", newPresences: [{ status: "online" }] });
  expect(watcher.presenceState()).toEqual({ ann: [{ presence_ref: expect.any(String), status: "online" }] });
  expect(await tracker.untrack()).toBe("ok");
  expect((await leaves.until(1))[0]).toMatchObject({ key: "ann" });
  expect(watcher.presenceState()).toEqual({});
}, 30_000);

test("private channels follow RLS on realtime.messages; a bad API key never subscribes", async () => {
  await server.sql(`create policy "members read" on realtime.messages for select to authenticated
    using ((select realtime.topic()) = 'members' and extension = 'broadcast')`);
  const member = client();
  member.realtime.setAuth(await userToken(server, USER_A));
  const members = member.channel("members", { config: { private: true } });
  expect(await subscribe(members)).toBe("SUBSCRIBED");
  // Reading is allowed, tracking presence needs an insert policy for extension 'presence'.
  expect(await members.track({ online: true })).toBe("error");
  const again = member.channel("members-2", { config: { private: true } });
  await server.sql(`create policy "members-2 read" on realtime.messages for select to authenticated
    using ((select realtime.topic()) = 'members-2')`);
  await server.sql(`create policy "members-2 track" on realtime.messages for insert to authenticated
    with check ((select realtime.topic()) = 'members-2' and extension = 'presence')`);
  expect(await subscribe(again)).toBe("SUBSCRIBED");
  expect(await again.track({ online: true })).toBe("ok");
  expect(await subscribe(client().channel("members", { config: { private: true } }))).toBe("CHANNEL_ERROR");

  const bad = clientFor(server, "not-a-valid-key");
  clients.push(bad);
  const status = await subscribe(bad.channel("anything", { config: {} }));
  expect(status).not.toBe("SUBSCRIBED");
}, 30_000);

test("a role sees only the columns it may select; without SELECT on the key it gets the platform's error", async () => {
  const got = collector<any>();
  const channel = client()
    .channel("grants")
    .on("postgres_changes", { event: "INSERT", schema: "public", table: "cards" }, (p) => got.push(p))
    .on("postgres_changes", { event: "INSERT", schema: "public", table: "vault" }, (p) => got.push(p));
  await subscribeChanges(channel);
  await server.sql(
    "insert into public.cards values (1, 'seen', 'hidden'); insert into public.vault values (1, 'x')",
  );
  const [card, vault] = await got.until(2);
  expect(card).toMatchObject({ table: "cards", new: { id: 1, title: "seen" }, errors: null });
  expect(card.new).not.toHaveProperty("secret");
  expect(vault).toMatchObject({
    table: "vault",
    eventType: "INSERT",
    new: {},
    errors: ["Error 401: Unauthorized"],
  });
}, 20_000);
