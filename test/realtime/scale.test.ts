import type { RealtimeChannel, SupabaseClient } from "@supabase/supabase-js";
import { authenticatorStatementsDuring } from "../helpers/statements";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { clientFor, userToken } from "../rest/fixtures";

/**
 * postgres_changes with many subscribers of equal claims, through the platform's JavaScript client: every
 * subscriber receives a change exactly once, and the server checks the row once per (table, role+claims)
 * group, not once per subscriber. The checks are counted as the statements sent on `authenticator`
 * connections (the role data requests and realtime's row checks log in as) while the change is delivered.
 */

const USER = "11111111-1111-4111-8111-111111111111";
const USER_CHANNELS = 100;
const ANON_CHANNELS = 20;

let server: TestServer;
const clients: SupabaseClient[] = [];

beforeAll(async () => {
  server = await startTestServer();
  await server.sql(`
    create table public.feed (id int primary key, user_id uuid, public boolean not null, body text);
    grant select on public.feed to anon, authenticated;
    alter table public.feed enable row level security;
    create policy "public or own" on public.feed for select to anon, authenticated
      using (public or user_id = auth.uid());
    create table public.marker (id int primary key);
    grant select on public.marker to anon, authenticated;
    alter publication supabase_realtime add table public.feed, public.marker;`);
  // 100 channels plus a marker channel on one socket, all joined at once: above the default limits.
  const res = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/realtime`, {
    body: { max_channels_per_client: 200, max_joins_per_second: 1000 },
  });
  expect(res.status).toBe(204);
}, 60_000);

afterAll(async () => {
  for (const c of clients) {
    await c.removeAllChannels();
    c.realtime.disconnect();
  }
  await server.stop();
});

const statementsDuring = authenticatorStatementsDuring;

/** Realtime's row checks: the rows found again by key under the subscriber's role (RLS). */
const rowChecks = (statements: string[]) => statements.filter((s) => /from unnest\(/i.test(s));

function subscribeChanges(channel: RealtimeChannel): Promise<void> {
  return new Promise((resolve, reject) => {
    channel.on("system", {}, (p: { extension?: string; status?: string; message?: string }) => {
      if (p.extension !== "postgres_changes") return;
      if (p.status === "ok") resolve();
      else reject(new Error(`postgres_changes refused: ${p.message}`));
    });
    channel.subscribe((status, err) => {
      if (status !== "SUBSCRIBED") reject(err ?? new Error(status));
    });
  });
}

/** One socket with `count` channels on public.feed; every event is kept by channel. */
async function group(name: string, count: number, token?: string) {
  const c = clientFor(server);
  clients.push(c);
  if (token) await c.realtime.setAuth(token);
  const received: { id: number }[][] = [];
  let markers = 0;
  const add = async (n: number) => {
    const start = received.length;
    for (let i = start; i < start + n; i++) received.push([]);
    await Promise.all(
      Array.from({ length: n }, (_, k) =>
        subscribeChanges(
          c
            .channel(`${name}-${start + k}`)
            .on("postgres_changes", { event: "INSERT", schema: "public", table: "feed" }, (p) =>
              received[start + k].push(p.new as { id: number }),
            ),
        ),
      ),
    );
  };
  await subscribeChanges(
    c
      .channel(`${name}-marker`)
      .on("postgres_changes", { event: "INSERT", schema: "public", table: "marker" }, () => markers++),
  );
  return {
    received,
    add,
    /** Resolves once every channel received the row `id`. */
    async until(id: number) {
      while (received.some((r) => !r.some((row) => row.id === id)))
        await new Promise((r) => setTimeout(r, 20));
    },
    /** Resolves once the marker's n-th insert arrived: frames sent before it on this socket are in. */
    async markerUntil(n: number) {
      while (markers < n) await new Promise((r) => setTimeout(r, 20));
    },
  };
}

test("100 subscribers of equal claims: each receives the insert once, checked once per claims group", async () => {
  const users = await group("user", 0, await userToken(server, USER));
  const anons = await group("anon", 0);
  await users.add(1);
  await anons.add(1);

  // One subscriber per group: the statements one change costs.
  const single = await statementsDuring(async () => {
    await server.sql("insert into public.feed values (1, null, true, 'one')");
    await Promise.all([users.until(1), anons.until(1)]);
  });

  await users.add(USER_CHANNELS - 1);
  await anons.add(ANON_CHANNELS - 1);
  expect(users.received).toHaveLength(USER_CHANNELS);
  expect(anons.received).toHaveLength(ANON_CHANNELS);

  const many = await statementsDuring(async () => {
    await server.sql(`insert into public.feed values (2, '${USER}', true, 'two')`);
    await Promise.all([users.until(2), anons.until(2)]);
  });
  // A later change on this socket: any second copy of row 2 would have arrived before it.
  await server.sql("insert into public.marker values (1)");
  await Promise.all([users.markerUntil(1), anons.markerUntil(1)]);

  // The first channel of each group also holds row 1; every channel holds row 2 exactly once.
  for (const r of [...users.received, ...anons.received]) {
    expect(r.filter((row) => row.id === 2)).toEqual([{ id: 2, user_id: USER, public: true, body: "two" }]);
  }
  expect(users.received.map((r) => r.length)).toEqual([2, ...Array(USER_CHANNELS - 1).fill(1)]);
  expect(anons.received.map((r) => r.length)).toEqual([2, ...Array(ANON_CHANNELS - 1).fill(1)]);
  // Two groups (the user's claims, anon), one row check each, whatever the number of subscribers.
  const checks = rowChecks(many);
  process.stdout.write(
    `realtime scale: ${USER_CHANNELS + ANON_CHANNELS} subscribers in 2 claims groups -> ` +
      `${checks.length} row-check queries, ${many.length} statements in all ` +
      `(1 subscriber per group: ${rowChecks(single).length} and ${single.length})\n`,
  );
  expect(checks).toHaveLength(2);
  // No statement per subscriber: every statement of the change with many subscribers is one the change with one
  // subscriber per group ran as often (that window may hold more: a new data connection gets its vault session).
  const left = single.map((s) => s.replace(/\s+/g, " "));
  for (const statement of many.map((s) => s.replace(/\s+/g, " "))) {
    const at = left.indexOf(statement);
    expect({ statement, inSingle: at >= 0 }).toEqual({ statement, inSingle: true });
    left.splice(at, 1);
  }
}, 60_000);
