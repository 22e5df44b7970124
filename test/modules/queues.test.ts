import type { SupabaseClient } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { clientFor, userToken } from "../rest/fixtures";

/**
 * Queues (sql/project/740_pgmq.sql, 741_pgmq_public.sql): pgmq's SQL interface as the project's owner writes
 * it in migrations, and pgmq_public through supabase-js once the project exposes that schema, as the
 * platform's "Expose Queues via PostgREST" switch does. What a call did is checked as the superuser (a
 * second channel): the queue and archive tables' rows.
 */

const USER_A = "11111111-1111-4111-8111-111111111111";
const USER_B = "22222222-2222-4222-8222-222222222222";

let server: TestServer;

/** SQL as the project's owner, through the Management API (as migrations and the SQL editor run). */
async function ownerSql(query: string): Promise<any[]> {
  const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, { body: { query } });
  if (res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** The messages of a queue's table (q_ or a_), read as the superuser. */
async function rowsOf(table: string): Promise<{ msg_id: string; message: unknown }[]> {
  return (await server.sql(`select msg_id, message from pgmq.${table} order by msg_id`)).rows;
}

function queues(key: string, token?: string): SupabaseClient<any, any, any> {
  return clientFor(server, key, token) as SupabaseClient<any, any, any>;
}

beforeAll(async () => {
  server = await startTestServer();
}, 60_000);

afterAll(() => server.stop());

describe("pgmq's SQL interface", () => {
  it("creates a queue owned by the project's owner, sends, reads with a visibility timeout, pops, archives and deletes", async () => {
    await ownerSql("select pgmq.create('jobs')");
    const { rows: owners } = await server.sql(
      `select c.relname, r.rolsuper from pg_class c join pg_roles r on r.oid = c.relowner
        where c.relnamespace = 'pgmq'::regnamespace and c.relname in ('q_jobs', 'a_jobs') order by 1`,
    );
    expect(owners).toEqual([
      { relname: "a_jobs", rolsuper: false },
      { relname: "q_jobs", rolsuper: false },
    ]);

    const [{ send: first }] = await ownerSql(`select * from pgmq.send('jobs', '{"n": 1}')`);
    const batch = await ownerSql(
      `select * from pgmq.send_batch('jobs', array['{"n": 2}', '{"n": 3}']::jsonb[])`,
    );
    expect(batch.map((r) => r.send_batch)).toEqual([first + 1, first + 2]);
    await ownerSql(`select * from pgmq.send('jobs', '{"n": 4}', 3600)`); // delayed an hour

    const read = await ownerSql("select * from pgmq.read('jobs', 30, 2)");
    expect(read.map((m) => m.message)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(read[0]).toMatchObject({ msg_id: first, read_ct: 1, headers: null });
    // Hidden for 30 seconds: the next read gets the third message only (the fourth is delayed).
    expect((await ownerSql("select * from pgmq.read('jobs', 30, 10)")).map((m) => m.message)).toEqual([
      { n: 3 },
    ]);
    expect(await ownerSql("select * from pgmq.read('jobs', 30, 10)")).toEqual([]);
    // set_vt makes one visible again; a conditional read picks by content.
    await ownerSql(`select * from pgmq.set_vt('jobs', ${first}, 0)`);
    expect(
      (await ownerSql(`select * from pgmq.read('jobs', 30, 10, '{"n": 1}')`)).map((m) => [
        m.message,
        m.read_ct,
      ]),
    ).toEqual([[{ n: 1 }, 2]]);

    expect(await ownerSql(`select pgmq.archive('jobs', ${first}) as ok`)).toEqual([{ ok: true }]);
    expect(await ownerSql(`select pgmq.archive('jobs', ${first}) as ok`)).toEqual([{ ok: false }]);
    expect(await ownerSql(`select pgmq.delete('jobs', ${first + 1}) as ok`)).toEqual([{ ok: true }]);
    expect((await rowsOf("a_jobs")).map((r) => r.message)).toEqual([{ n: 1 }]);
    expect((await rowsOf("q_jobs")).map((r) => r.message)).toEqual([{ n: 3 }, { n: 4 }]);

    const [metrics] = await ownerSql("select * from pgmq.metrics('jobs')");
    expect(metrics).toMatchObject({
      queue_name: "jobs",
      queue_length: 2,
      total_messages: 4,
      queue_visible_length: 0,
    });
    await ownerSql(`select pgmq.set_vt('jobs', ${first + 2}, 0)`);
    expect(await ownerSql("select msg_id, message from pgmq.pop('jobs')")).toEqual([
      { msg_id: first + 2, message: { n: 3 } },
    ]);
    expect(await ownerSql("select pgmq.purge_queue('jobs') as n")).toEqual([{ n: 1 }]);
    expect(await rowsOf("q_jobs")).toEqual([]);
  });

  it("lists, measures and drops queues, unlogged ones too, and refuses names that could end a statement", async () => {
    await ownerSql("select pgmq.create_unlogged('fast'); select pgmq.create('Mixed_Case')");
    const listed = await ownerSql(
      "select queue_name, is_partitioned, is_unlogged from pgmq.list_queues() order by 1",
    );
    expect(listed).toEqual(
      expect.arrayContaining([
        { queue_name: "fast", is_partitioned: false, is_unlogged: true },
        { queue_name: "Mixed_Case", is_partitioned: false, is_unlogged: false },
      ]),
    );
    const { rows } = await server.sql(
      "select relpersistence from pg_class where oid in ('pgmq.q_fast'::regclass, 'pgmq.q_mixed_case'::regclass) order by relname",
    );
    expect(rows.map((r) => r.relpersistence)).toEqual(["u", "p"]);
    expect((await ownerSql("select queue_name from pgmq.metrics_all()")).length).toBeGreaterThanOrEqual(2);
    expect(await ownerSql("select pgmq.drop_queue('fast') as dropped")).toEqual([{ dropped: true }]);
    expect(
      (await server.sql("select to_regclass('pgmq.q_fast') as t, to_regclass('pgmq.a_fast') as a")).rows,
    ).toEqual([{ t: null, a: null }]);
    await expect(ownerSql("select pgmq.create('x; drop table pgmq.meta')")).rejects.toThrow(
      /invalid characters/,
    );
    await expect(ownerSql(`select pgmq.send('x''--', '{}')`)).rejects.toThrow(/invalid characters/);
    await expect(ownerSql(`select pgmq.create('${"q".repeat(48)}')`)).rejects.toThrow(/too long/);
    expect((await server.sql("select to_regclass('pgmq.meta') as meta")).rows[0].meta).toBe("pgmq.meta");
  });

  it("partitions a queue by msg_id: partitions made ahead as messages arrive, dropped past the retention", async () => {
    await ownerSql("select pgmq.create_partitioned('parts', '10', '20')");
    const partitions = async (parent: string) =>
      (
        await server.sql(
          `select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
            where i.inhparent = $1::regclass order by length(c.relname), c.relname`,
          [`pgmq.${parent}`],
        )
      ).rows.map((r) => r.relname);
    expect(await partitions("q_parts")).toEqual(["q_parts_0", "q_parts_10"]);
    const messages = Array.from({ length: 35 }, (_, i) => `{"i": ${i}}`);
    const ids = await ownerSql(
      `select * from pgmq.send_batch('parts', array['${messages.join("','")}']::jsonb[])`,
    );
    expect(ids).toHaveLength(35);
    // Ids 1..35 live in 0..40, made as the batch arrived.
    expect(await partitions("q_parts")).toEqual([
      "q_parts_0",
      "q_parts_10",
      "q_parts_20",
      "q_parts_30",
      "q_parts_40",
    ]);
    // The next partitions are made when messages reach them; then the first (ids below 10) is past the
    // retention of 20 ids, in the queue and its archive.
    await ownerSql(
      `select * from pgmq.send_batch('parts', array['{"i": 35}', '{"i": 36}', '{"i": 37}', '{"i": 38}', '{"i": 39}']::jsonb[])`,
    );
    await ownerSql(`select * from pgmq.send('parts', '{"i": 40}')`);
    expect(await partitions("q_parts")).toEqual([
      "q_parts_10",
      "q_parts_20",
      "q_parts_30",
      "q_parts_40",
      "q_parts_50",
    ]);
    expect(await partitions("a_parts")).toEqual([
      "a_parts_10",
      "a_parts_20",
      "a_parts_30",
      "a_parts_40",
      "a_parts_50",
    ]);
    // Two senders reaching the next interval together: one makes its partitions, neither fails.
    const five = `array[${Array.from({ length: 5 }, (_, i) => `'{"c": ${i}}'`).join(", ")}]::jsonb[]`;
    const sent = await Promise.all([
      ownerSql(`select * from pgmq.send_batch('parts', ${five})`),
      ownerSql(`select * from pgmq.send_batch('parts', ${five})`),
    ]);
    expect(sent.flat()).toHaveLength(10);
    // Whichever sender came second (or the next send, when both read the sequence together) makes the
    // partition one interval beyond.
    await ownerSql(`select * from pgmq.send('parts', '{"i": 51}')`);
    expect((await partitions("q_parts")).at(-1)).toBe("q_parts_60");
    const read = await ownerSql("select msg_id from pgmq.read('parts', 30, 1)");
    expect(await ownerSql(`select pgmq.archive('parts', ${read[0].msg_id}) as ok`)).toEqual([{ ok: true }]);
    expect(
      (await ownerSql("select * from pgmq.list_queues() where queue_name = 'parts'"))[0].is_partitioned,
    ).toBe(true);
  });

  it("partitions a queue by time", async () => {
    await ownerSql("select pgmq.create_partitioned('daily', '1 day', '7 days')");
    const { rows } = await server.sql(
      "select count(*)::int as n from pg_inherits where inhparent = 'pgmq.q_daily'::regclass",
    );
    expect(rows[0].n).toBe(2);
    await ownerSql(`select pgmq.send('daily', '{"at": "now"}')`);
    expect((await rowsOf("q_daily")).map((r) => r.message)).toEqual([{ at: "now" }]);
    await expect(ownerSql("select pgmq.create_partitioned('monthly', '1 month', '1 year')")).rejects.toThrow(
      /days, hours, minutes or seconds/,
    );
  });
});

describe("pgmq_public through supabase-js", () => {
  beforeAll(async () => {
    await ownerSql(`
      select pgmq.create('tasks');
      alter table pgmq.q_tasks enable row level security;
      alter table pgmq.a_tasks enable row level security;
      select pgmq.create('inbox');
      alter table pgmq.q_inbox enable row level security;
      alter table pgmq.a_inbox enable row level security;
      -- Signed-in users may send to their inbox and read, archive or delete only their own messages.
      grant select, insert, update, delete on pgmq.q_inbox to authenticated;
      grant select, insert on pgmq.a_inbox to authenticated;
      create policy "send own" on pgmq.q_inbox for insert to authenticated
        with check (message->>'owner' = (select auth.uid())::text);
      create policy "see own" on pgmq.q_inbox for select to authenticated
        using (message->>'owner' = (select auth.uid())::text);
      create policy "take own" on pgmq.q_inbox for update to authenticated
        using (message->>'owner' = (select auth.uid())::text);
      create policy "drop own" on pgmq.q_inbox for delete to authenticated
        using (message->>'owner' = (select auth.uid())::text);
      create policy "archive own" on pgmq.a_inbox for insert to authenticated
        with check (message->>'owner' = (select auth.uid())::text);
      create policy "see own archive" on pgmq.a_inbox for select to authenticated
        using (message->>'owner' = (select auth.uid())::text);`);
    // The switch's second step: the Data API serves pgmq_public.
    const patched = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/postgrest`, {
      body: { db_schema: "public, pgmq_public" },
    });
    expect(patched.status).toBe(200);
  });

  it("sends, reads (invisible during the visibility timeout) and archives with the secret key", async () => {
    const service = queues(server.serviceKey).schema("pgmq_public");
    const sent = await service.rpc("send", { queue_name: "tasks", message: { job: "resize" } });
    expect(sent.error).toBeNull();
    const [id] = sent.data as number[];
    const batch = await service.rpc("send_batch", {
      queue_name: "tasks",
      messages: [{ job: "crop" }, { job: "blur" }],
      sleep_seconds: 0,
    });
    expect(batch.data).toEqual([id + 1, id + 2]);

    const read = await service.rpc("read", { queue_name: "tasks", sleep_seconds: 30, n: 1 });
    expect(read.error).toBeNull();
    expect(read.data).toEqual([
      expect.objectContaining({ msg_id: id, read_ct: 1, message: { job: "resize" } }),
    ]);
    // Invisible while its visibility timeout runs: the next reads get the others, then nothing.
    const next = await service.rpc("read", { queue_name: "tasks", sleep_seconds: 30, n: 5 });
    expect((next.data as { msg_id: number }[]).map((m) => m.msg_id)).toEqual([id + 1, id + 2]);
    expect((await service.rpc("read", { queue_name: "tasks", sleep_seconds: 30, n: 5 })).data).toEqual([]);

    expect((await service.rpc("archive", { queue_name: "tasks", message_id: id })).data).toBe(true);
    expect((await service.rpc("delete", { queue_name: "tasks", message_id: id + 1 })).data).toBe(true);
    expect((await service.rpc("delete", { queue_name: "tasks", message_id: id + 1 })).data).toBe(false);
    expect((await rowsOf("a_tasks")).map((r) => r.message)).toEqual([{ job: "resize" }]);
    expect((await rowsOf("q_tasks")).map((r) => r.message)).toEqual([{ job: "blur" }]);

    await service.rpc("send", { queue_name: "tasks", message: { job: "last" }, sleep_seconds: 0 });
    await server.sql("update pgmq.q_tasks set vt = now() - interval '1 second'");
    const popped = await service.rpc("pop", { queue_name: "tasks" });
    expect((popped.data as { message: unknown }[]).map((m) => m.message)).toEqual([{ job: "blur" }]);
  });

  it("lets a signed-in user use a queue only as its grants and RLS policies allow", async () => {
    const a = queues(server.anonKey, await userToken(server, USER_A)).schema("pgmq_public");
    const b = queues(server.anonKey, await userToken(server, USER_B)).schema("pgmq_public");
    const mine = await a.rpc("send", { queue_name: "inbox", message: { owner: USER_A, text: "hi" } });
    expect(mine.error).toBeNull();
    const forged = await a.rpc("send", { queue_name: "inbox", message: { owner: USER_B, text: "spoof" } });
    expect(forged.error?.message).toMatch(/row-level security/);
    await b.rpc("send", { queue_name: "inbox", message: { owner: USER_B, text: "b's" } });

    // B sees only its own message; A's stays visible to A.
    const bRead = await b.rpc("read", { queue_name: "inbox", sleep_seconds: 30, n: 10 });
    expect((bRead.data as { message: { text: string } }[]).map((m) => m.message.text)).toEqual(["b's"]);
    const [aMessage] = (await a.rpc("read", { queue_name: "inbox", sleep_seconds: 30, n: 10 })).data as {
      msg_id: number;
    }[];
    const taken = await b.rpc("archive", { queue_name: "inbox", message_id: aMessage.msg_id });
    expect(taken.error).toBeNull();
    expect(taken.data).toBe(false);
    expect((await b.rpc("delete", { queue_name: "inbox", message_id: aMessage.msg_id })).data).toBe(false);
    expect((await a.rpc("archive", { queue_name: "inbox", message_id: aMessage.msg_id })).data).toBe(true);
    expect((await rowsOf("a_inbox")).map((r) => r.message)).toEqual([{ owner: USER_A, text: "hi" }]);
    expect((await rowsOf("q_inbox")).map((r) => r.message)).toEqual([{ owner: USER_B, text: "b's" }]);
  });

  it("refuses the anon key on queues it was granted nothing on, and reaches nothing beyond pgmq_public", async () => {
    const anon = queues(server.anonKey);
    const before = await rowsOf("q_tasks");
    for (const [fn, args] of [
      ["send", { queue_name: "tasks", message: { job: "evil" } }],
      ["read", { queue_name: "tasks", sleep_seconds: 0, n: 10 }],
      ["pop", { queue_name: "tasks" }],
      ["delete", { queue_name: "tasks", message_id: 1 }],
      ["send", { queue_name: "inbox", message: { owner: USER_A } }],
    ] as const) {
      const res = await anon.schema("pgmq_public").rpc(fn, args);
      expect(res.error?.message).toMatch(/permission denied/);
    }
    // Names are quoted into the statements: no other table, no statement of the caller's.
    const injected = await anon
      .schema("pgmq_public")
      .rpc("read", { queue_name: 'tasks" where true; --', sleep_seconds: 0, n: 1 });
    expect(injected.error).not.toBeNull();
    // pgmq itself, and the partition upkeep, are not in the Data API.
    const direct = await anon.schema("pgmq").rpc("create", { queue_name: "mine" });
    expect(direct.error?.code).toBe("PGRST106");
    expect(await rowsOf("q_tasks")).toEqual(before);
    expect((await server.sql("select to_regclass('pgmq.q_mine') as t")).rows[0].t).toBeNull();
  });
});

describe("what queues run as", () => {
  it("has no function a tenant can call that runs as a superuser or resolves names from the caller's path", async () => {
    const { rows } = await server.sql(`
      select p.oid::regprocedure::text as fn, p.prosecdef as definer, r.rolsuper as superuser, p.proconfig as config
        from pg_proc p join pg_roles r on r.oid = p.proowner
       where p.pronamespace in ('pgmq'::regnamespace, 'pgmq_public'::regnamespace, 'realtime'::regnamespace)`);
    expect(rows.length).toBeGreaterThan(30);
    expect(rows.filter((r) => r.superuser).map((r) => r.fn)).toEqual([]);
    const definers = rows.filter((r) => r.definer);
    expect(definers.map((r) => r.fn)).toEqual(["pgmq._maintain_partitions(text,bigint)"]);
    expect(definers[0].config).toEqual(["search_path=pg_catalog, pg_temp"]);
  });
});
