import { createClient, type RealtimeChannel, type SupabaseClient } from "@supabase/supabase-js";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { pruneMessages } from "../../src/realtime/database";
import { startTestServer, TEST_JWT_SECRET, TEST_KEK, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { mgmt } from "../management/client";
import { userToken } from "../rest/fixtures";

/**
 * Broadcast from the database (sql/project/750_realtime_broadcast.sql, src/realtime/database.ts):
 * realtime.send and a trigger's realtime.broadcast_changes reach realtime-js subscribers of the topic on every
 * Strata node; a private topic only the subscribers that the RLS policies on realtime.messages let in. What
 * was stored is checked as the superuser (a second channel). Nothing here waits a fixed time: where a message
 * must not arrive, a later one on the same topic (delivered in order) shows that it did not.
 */

const USER_A = "11111111-1111-4111-8111-111111111111";
const USER_B = "22222222-2222-4222-8222-222222222222";

let server: TestServer;
let second: RunningStrata;
const clients: SupabaseClient[] = [];

async function ownerSql(query: string): Promise<any[]> {
  const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, { body: { query } });
  if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

function client(url = server.url, key = server.anonKey): SupabaseClient {
  const c = createClient(url, key, { auth: { persistSession: false, autoRefreshToken: false } });
  clients.push(c);
  return c;
}

async function signedIn(user: string, url = server.url): Promise<SupabaseClient> {
  const c = client(url);
  c.realtime.setAuth(await userToken(server, user));
  return c;
}

interface Received {
  event: string;
  payload: Record<string, any>;
  meta?: { id: string };
}

/** A channel listening to broadcast `events`, with what it received and a way to wait for the n-th one. */
function listen(c: SupabaseClient, topic: string, events: string[], isPrivate = false) {
  const got: Received[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const channel: RealtimeChannel = c.channel(topic, { config: { private: isPrivate } });
  for (const event of events) {
    channel.on("broadcast", { event }, (m) => {
      got.push(m as unknown as Received);
      for (const w of waiters.filter((w) => got.length >= w.n)) w.resolve();
    });
  }
  return {
    got,
    status: new Promise<string>((resolve) => channel.subscribe((s) => resolve(s))),
    until: (n: number) =>
      got.length >= n
        ? Promise.resolve(got)
        : new Promise<Received[]>((r) => waiters.push({ n, resolve: () => r(got) })),
  };
}

beforeAll(async () => {
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
  // As the platform's docs write it: a trigger function (security definer, so it stores the message as the
  // owner) sends each change of public.items to the private topic of its room; members of a room may read it.
  await ownerSql(`
    create table public.items (id int primary key, room text not null, body text);
    create table public.members (user_id uuid not null, room text not null);
    grant select on public.members to authenticated;
    create function public.items_broadcast() returns trigger language plpgsql security definer as $$
    begin
      perform realtime.broadcast_changes('room:' || coalesce(new.room, old.room), tg_op, tg_op,
        tg_table_name, tg_table_schema, new, old);
      return null;
    end $$;
    create trigger items_broadcast after insert or update or delete on public.items
      for each row execute function public.items_broadcast();
    create policy "members read their rooms" on realtime.messages for select to authenticated
      using (exists (select 1 from public.members m
                      where m.user_id = (select auth.uid()) and 'room:' || m.room = (select realtime.topic())));
    insert into public.members values ('${USER_A}', '1');`);
}, 60_000);

afterAll(async () => {
  for (const c of clients) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  await second.stop();
  await server.stop();
});

describe("realtime.broadcast_changes from a trigger", () => {
  it("reaches a private channel's subscriber only when RLS on realtime.messages lets it read the topic", async () => {
    const a = listen(await signedIn(USER_A), "room:1", ["INSERT", "UPDATE", "DELETE", "note"], true);
    const b = listen(await signedIn(USER_B), "room:1", ["INSERT"], true);
    const onPublic = listen(client(), "room:1", ["INSERT", "note"]);
    expect(await a.status).toBe("SUBSCRIBED");
    expect(await b.status).toBe("CHANNEL_ERROR");
    expect(await onPublic.status).toBe("SUBSCRIBED");

    await ownerSql(`
      insert into public.items values (1, '1', 'hello');
      update public.items set body = 'hello again' where id = 1;
      delete from public.items where id = 1;`);
    const [inserted, updated, deleted] = await a.until(3);
    expect(inserted).toMatchObject({
      event: "INSERT",
      payload: {
        operation: "INSERT",
        table: "items",
        schema: "public",
        record: { id: 1, room: "1", body: "hello" },
        old_record: null,
      },
    });
    expect(inserted.meta?.id).toBe(inserted.payload.id);
    expect(updated.payload).toMatchObject({
      operation: "UPDATE",
      record: { body: "hello again" },
      old_record: { body: "hello" },
    });
    expect(deleted.payload).toMatchObject({ operation: "DELETE", record: null, old_record: { id: 1 } });

    // The public channel of the same name got none of them: a public message sent after them arrives alone.
    await ownerSql(`select realtime.send('{"text": "public"}', 'note', 'room:1', false)`);
    expect((await onPublic.until(1)).map((m) => [m.event, m.payload.text])).toEqual([["note", "public"]]);
    expect(a.got).toHaveLength(3);

    // Stored as the platform stores them (second channel).
    const { rows } = await server.sql(
      `select event, private, payload->>'operation' as op from realtime.messages where topic = 'room:1' order by inserted_at, event`,
    );
    expect(rows).toEqual(
      expect.arrayContaining([
        { event: "INSERT", private: true, op: "INSERT" },
        { event: "note", private: false, op: null },
      ]),
    );

    // Without the membership the policy refuses a new subscriber.
    await ownerSql(`delete from public.members where user_id = '${USER_A}'`);
    expect(await listen(await signedIn(USER_A), "room:1", ["INSERT"], true).status).toBe("CHANNEL_ERROR");
    await ownerSql(`insert into public.members values ('${USER_A}', '1')`);
  });
});

describe("realtime.send", () => {
  it("reaches the topic's subscribers on every node, with the message id in payload and meta", async () => {
    const here = listen(client(), "news", ["headline"]);
    const there = listen(client(`http://127.0.0.1:${second.port}`), "news", ["headline"]);
    expect(await here.status).toBe("SUBSCRIBED");
    expect(await there.status).toBe("SUBSCRIBED");
    await ownerSql(`select realtime.send('{"title": "Strata"}', 'headline', 'news', false)`);
    const [[mine], [theirs]] = await Promise.all([here.until(1), there.until(1)]);
    expect(mine).toEqual({
      type: "broadcast",
      event: "headline",
      payload: { title: "Strata", id: expect.any(String) },
      meta: { id: mine.payload.id },
    });
    expect(theirs).toEqual(mine);
    const { rows } = await server.sql(
      "select topic, private, extension from realtime.messages where id = $1",
      [mine.meta!.id],
    );
    expect(rows).toEqual([{ topic: "news", private: false, extension: "broadcast" }]);
  });

  it("sends a message too large for NOTIFY by reading it back, and keeps an id the payload has", async () => {
    const big = listen(client(`http://127.0.0.1:${second.port}`), "bulk", ["blob"]);
    expect(await big.status).toBe("SUBSCRIBED");
    await ownerSql(
      `select realtime.send(jsonb_build_object('id', 'mine', 'data', repeat('x', 20000)), 'blob', 'bulk', false)`,
    );
    const [m] = await big.until(1);
    expect(m.payload.id).toBe("mine");
    expect(m.payload.data).toHaveLength(20000);
    expect(m.meta?.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("sends nothing from a transaction that rolls back, nor what RLS refuses to store", async () => {
    const audit = listen(client(), "audit", ["entry"]);
    expect(await audit.status).toBe("SUBSCRIBED");
    await expect(
      ownerSql(`do $$ begin
        perform realtime.send('{"n": "rolled back"}', 'entry', 'audit', false);
        raise exception 'undo';
      end $$`),
    ).rejects.toThrow(/undo/);
    // A caller without an insert policy on realtime.messages: stored nothing, a warning only (as on the platform).
    await ownerSql(`
      create function public.shout(msg text) returns void language sql as $$
        select realtime.send(jsonb_build_object('n', msg), 'entry', 'audit', false) $$;
      grant execute on function public.shout(text) to anon;`);
    const anon = client();
    for (let i = 0; i < 50; i++) {
      const res = await anon.rpc("shout", { msg: "from anon" });
      if (!res.error) break;
      await new Promise((r) => setTimeout(r, 100)); // the REST schema cache sees the new function
    }
    await ownerSql(`select realtime.send('{"n": "committed"}', 'entry', 'audit', false)`);
    expect((await audit.until(1)).map((m) => m.payload.n)).toEqual(["committed"]);
    const { rows } = await server.sql(
      "select payload->>'n' as n from realtime.messages where topic = 'audit' order by inserted_at",
    );
    expect(rows).toEqual([{ n: "committed" }]);
  });
});

describe("who delivers a message", () => {
  it("reads a message announced by id as the project's owner, and ignores announcements it cannot trust", async () => {
    const watcher = listen(client(), "watched", ["ping"]);
    expect(await watcher.status).toBe("SUBSCRIBED");
    const [{ id }] = await ownerSql(`
      select realtime.send(jsonb_build_object('data', repeat('y', 9000)), 'ping', 'watched', false);
      select id from realtime.messages where topic = 'watched'`);
    await watcher.until(1);
    // The tenant makes reading realtime.messages run its code, and forges announcements of its own.
    await ownerSql(`
      create table public.readers (who text, su boolean);
      create function public.spy() returns boolean language plpgsql as $$
      begin
        insert into public.readers values (current_user, (select rolsuper from pg_roles where rolname = current_user));
        return true;
      end $$;
      create policy "spied" on realtime.messages for select using (public.spy());
      alter table realtime.messages force row level security;
      select pg_notify('strata_realtime', '{"db": {"id": "${id}"}}');
      select pg_notify('strata_realtime', '{"db": {"id": "watched; drop table public.items"}}');
      select pg_notify('strata_realtime', '{"db": {"id": "none", "topic": "watched", "event": "ping", "private": "no", "payload": 1}}');
      select pg_notify('strata_realtime', '{"db": {"id": 1, "topic": "watched", "event": "ping", "private": false, "payload": {"n": "forged inline"}}}');`);
    await ownerSql(`
      alter table realtime.messages no force row level security;
      drop policy "spied" on realtime.messages;
      select realtime.send('{"n": "last"}', 'ping', 'watched', false);`);
    const got = await watcher.until(3);
    // The stored message again (read back by its id), then the last one: the others were dropped.
    expect(got.map((m) => m.payload.n ?? m.payload.data?.length)).toEqual([9000, 9000, "last"]);
    const { rows } = await server.sql("select distinct who, su from public.readers");
    expect(rows).toEqual([{ who: `postgres_${server.ref}`, su: false }]);
    expect((await server.sql("select to_regclass('public.items') as t")).rows[0].t).toBe("items");
  });
});

describe("retention", () => {
  it("prunes messages older than 72 hours, as the owner", async () => {
    await server.sql(`
      insert into realtime.messages (topic, extension, event, payload, inserted_at)
      values ('old', 'broadcast', 'e', '{}', now() - interval '73 hours'),
             ('recent', 'broadcast', 'e', '{}', now() - interval '71 hours')`);
    const project = await server.strata.ctx.registry.get(server.ref);
    expect(await pruneMessages(project!)).toBeGreaterThanOrEqual(1);
    const { rows } = await server.sql(
      "select topic from realtime.messages where topic in ('old', 'recent') order by topic",
    );
    expect(rows).toEqual([{ topic: "recent" }]);
  });
});
