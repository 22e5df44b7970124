import type { SupabaseClient } from "@supabase/supabase-js";
import { replicationBackPressure } from "../../src/realtime/changes";
import { startTestServer, type TestServer } from "../helpers/server";
import { clientFor } from "../rest/fixtures";

/**
 * Back-pressure of the replication side: when decoded transactions wait for delivery (here a slow RLS
 * policy), the stream stops reading at the limit and resumes from the slot, and every change still arrives
 * once and in order.
 */

let server: TestServer;
let client: SupabaseClient;
const limit = replicationBackPressure.maxPending;

beforeAll(async () => {
  replicationBackPressure.maxPending = 2;
  server = await startTestServer();
  await server.sql(`
    create table public.slow (id int primary key);
    grant select on public.slow to anon;
    alter table public.slow enable row level security;
    create function public.slowly() returns boolean language sql as 'select pg_sleep(0.05) is not null';
    create policy "slow" on public.slow for select to anon using (public.slowly());
    alter publication supabase_realtime add table public.slow;`);
}, 60_000);

afterAll(async () => {
  replicationBackPressure.maxPending = limit;
  await client?.removeAllChannels();
  client?.realtime.disconnect();
  await server.stop();
});

test("the stream pauses while deliveries lag and still delivers every change once, in order", async () => {
  client = clientFor(server);
  const got: number[] = [];
  const ready = new Promise<void>((resolve) => {
    client
      .channel("slow")
      .on("postgres_changes", { event: "INSERT", schema: "public", table: "slow" }, (p) =>
        got.push((p.new as { id: number }).id),
      )
      .on("system", {}, (p: { extension?: string }) => p.extension === "postgres_changes" && resolve())
      .subscribe();
  });
  await ready;
  const pausesBefore = replicationBackPressure.pauses;
  // 12 transactions, one row each, written faster than the policy lets them be delivered.
  for (let id = 1; id <= 12; id++) await server.sql("insert into public.slow values ($1)", [id]);
  while (got.length < 12) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 300));
  expect(got).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  expect(replicationBackPressure.pauses).toBeGreaterThan(pausesBefore);
}, 40_000);
