import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { tenantSql, tenantSqlError } from "./sql";

/**
 * The platform docs' examples for the database modules (pg_cron, pg_net, Vault, Queues, Broadcast from the
 * database), each as written there, run as the project's owner through the Management API's SQL endpoint (the
 * SQL editor's). Only the docs' placeholder hosts are swapped for a name that never resolves, so that nothing
 * leaves the machine.
 */

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
});
afterAll(() => server.stop());

/** An example as the docs write it, its public hosts made unreachable. */
const example = (sql: string) =>
  tenantSql(server, sql.replace(/https:\/\/[a-z0-9.-]+\.(org|com|co)\b/g, "https://docs.invalid"));

describe("the docs' examples", () => {
  it("pg_cron: enable, schedule (cron syntax and seconds), alter, activate, run, inspect, unschedule", async () => {
    await example("create extension pg_cron with schema pg_catalog;");
    await example(`grant usage on schema cron to postgres;
grant all privileges on all tables in schema cron to postgres;`);
    await example(`create table events (event_time timestamptz);
create procedure do_something() language sql as $$ insert into events values (now()) $$;
create function hello_world() returns text language sql as $$ select 'hello world' $$;`);
    const [{ schedule: id }] = await example(
      "select cron.schedule('permanent-cron-job-name', '30 seconds', 'CALL do_something()');",
    );
    // Same name: an upsert of the same job.
    expect(
      await example("select cron.schedule('permanent-cron-job-name', '30 seconds', 'CALL do_something()');"),
    ).toEqual([{ schedule: id }]);
    for (const sql of [
      `select cron.schedule (
  'saturday-cleanup', -- name of the cron job
  '30 3 * * 6', -- Saturday at 3:30am (GMT)
  $$ delete from events where event_time < now() - interval '1 week' $$
);`,
      "select cron.schedule('nightly-vacuum', '0 3 * * *', 'VACUUM');",
      "select cron.schedule('call-db-function', '*/5 * * * *', 'SELECT hello_world()');",
      "select cron.schedule('call-db-procedure', '*/5 * * * *', 'CALL my_procedure()');",
      `select
  cron.schedule(
    'invoke-function-every-half-minute',
    '30 seconds',
    $$
    select
      net.http_post(
          url:='https://project-ref.supabase.co/functions/v1/function-name',
          headers:=jsonb_build_object('Content-Type','application/json', 'Authorization', 'Bearer ' || 'YOUR_ANON_KEY'),
          body:=jsonb_build_object('time', now() ),
          timeout_milliseconds:=5000
      ) as request_id;
    $$
  );`,
    ])
      expect((await example(sql))[0].schedule).toBeGreaterThan(id);

    await example(`select cron.alter_job(
  job_id := (select jobid from cron.job where jobname = 'permanent-cron-job-name'),
  schedule := '*/5 * * * *'
);`);
    await example(`select cron.alter_job(
  job_id := (select jobid from cron.job where jobname = 'permanent-cron-job-name'),
  active := false
);`);
    expect(
      await example("select schedule, active from cron.job where jobname = 'permanent-cron-job-name'"),
    ).toEqual([{ schedule: "*/5 * * * *", active: false }]);
    // Every second (the docs' '[1-59] seconds'), the VACUUM job and the procedure run as the owner.
    for (const name of ["nightly-vacuum", "permanent-cron-job-name"])
      await example(`select cron.alter_job(job_id := (select jobid from cron.job where jobname = '${name}'),
        schedule := '1 seconds', active := true)`);
    const runs = await until(async () => {
      const rows = await example(`select
  *
from cron.job_run_details
where jobid = (select jobid from cron.job where jobname = 'permanent-cron-job-name')
order by start_time desc
limit 10;`);
      return rows.some((r) => r.status === "succeeded") ? rows : undefined;
    }, 30_000);
    expect(runs[0]).toMatchObject({ command: "CALL do_something()", username: `postgres_${server.ref}` });
    await until(async () => {
      const rows = await example("select * from cron.job_run_details order by start_time desc limit 10;");
      return rows.some((r) => r.command === "VACUUM" && r.status === "succeeded") ? true : undefined;
    }, 30_000);
    expect((await example("select count(*)::int as n from events"))[0].n).toBeGreaterThan(0);

    expect(await example("select cron.unschedule('nightly-vacuum');")).toEqual([{ unschedule: true }]);
    expect(await example("select cron.unschedule('permanent-cron-job-name');")).toEqual([
      { unschedule: true },
    ]);
    // Its runs stay, as the docs warn.
    expect((await example("select count(*)::int as n from cron.job_run_details"))[0].n).toBeGreaterThan(0);
    expect(await tenantSqlError(server, "select cron.unschedule('job-name');")).toMatch(
      /could not find valid entry for job 'job-name'/,
    );
    await example("drop extension if exists pg_cron;"); // nothing of Strata's goes
    expect((await example("select count(*)::int as n from cron.job"))[0].n).toBe(4);
  }, 90_000);

  it("pg_net: enable, get, post, delete, a trigger, responses and privileges", async () => {
    await example('create extension pg_net with schema "extensions";');
    await example("create extension if not exists pg_net;");
    const [{ request_id: get }] = await example(`select
    net.http_get('https://news.ycombinator.com')
    as request_id;`);
    const [{ request_id: post }] = await example(`select
    net.http_post(
        url:='https://httpbin.org/post',
        body:='{"hello": "world"}'::jsonb
    ) as request_id;`);
    const [{ request_id: del }] = await example(`select
    net.http_delete(
        'https://dummy.restapiexample.com/api/v1/delete/2'
    ) as request_id;`);
    expect([post - get, del - post]).toEqual([1, 1]);
    await example(`create table example_table (id int primary key, name text);
insert into example_table values (1, 'a');
create or replace function notify_change()
    returns trigger
    language plpgsql
as $$
begin
    -- calls pg_net function net.http_post
    -- sends request to postman API
    perform "net"."http_post"(
      'https://postman-echo.com/post'::text,
      jsonb_build_object(
        'old_row', to_jsonb(old.*),
        'new_row', to_jsonb(new.*)
      ),
      headers:='{"Content-Type": "application/json"}'::jsonb
    ) as request_id;
    return new;
end $$;
create trigger on_change
    after update on example_table
    for each row
    execute function notify_change();
update example_table set name = 'b';`);
    await example(`with "selected_table_rows" as (
    select
        -- Converts all the rows into a JSONB array
        jsonb_agg(to_jsonb(example_table.*)) as JSON_payload
    from example_table
    -- good practice to LIMIT the max amount of rows
)
select
    net.http_post(
        url := 'https://postman-echo.com/post'::text,
        body := JSON_payload
    ) as request_id
from "selected_table_rows";`);
    const failed = await until(async () => {
      const rows = await example(`select
  *
from net._http_response
where "status_code" >= 400 or "error_msg" is not null
order by "created" desc;`);
      // Ours (the cron example's job may have posted too): the three above, the trigger's, the rows'.
      return rows.filter((r) => r.id >= get).length === 5 ? rows : undefined;
    }, 45_000);
    expect(Object.keys(failed[0]).sort()).toEqual(
      ["content", "content_type", "created", "error_msg", "headers", "id", "status_code", "timed_out"].sort(),
    );
    expect(await example(`select "content" from net._http_response where id = ${post}`)).toEqual([
      { content: null },
    ]);
    expect(
      await example(`select
  p.proname,
  has_function_privilege('anon', p.oid, 'execute') as anon_can_execute
from
  pg_proc as p
  join pg_namespace as n on n.oid = p.pronamespace
where n.nspname = 'net' and p.proname in ('http_get', 'http_post', 'http_delete') order by 1;`),
    ).toEqual(
      ["http_delete", "http_get", "http_post"].map((proname) => ({ proname, anon_can_execute: true })),
    );
    await example("revoke execute on function public.notify_change() from public, anon, authenticated;");
    expect(await example("select net.worker_restart();")).toEqual([{ worker_restart: true }]);
  }, 90_000);

  it("Vault: create, read decrypted, update", async () => {
    await example("create extension if not exists supabase_vault;");
    const [{ create_secret: first }] = await example("select vault.create_secret('my_s3kre3t');");
    const [{ create_secret: id }] = await example(
      "select vault.create_secret('another_s3kre3t', 'unique_name', 'This is the description');",
    );
    const latest = await example(`select *
from vault.decrypted_secrets
order by created_at desc
limit 3;`);
    expect(latest.map((s) => [s.id, s.name, s.description, s.decrypted_secret])).toEqual([
      [id, "unique_name", "This is the description", "another_s3kre3t"],
      [first, null, "", "my_s3kre3t"],
    ]);
    expect(Object.keys(latest[0])).toEqual([
      "id",
      "name",
      "description",
      "secret",
      "decrypted_secret",
      "key_id",
      "nonce",
      "created_at",
      "updated_at",
    ]);
    await example(`select
  vault.update_secret(
    '${id}',
    'n3w_upd@ted_s3kret',
    'updated_unique_name',
    'This is the updated description'
  );`);
    expect(
      await example(
        `select name, description, decrypted_secret from vault.decrypted_secrets where id = '${id}'`,
      ),
    ).toEqual([
      {
        name: "updated_unique_name",
        description: "This is the updated description",
        decrypted_secret: "n3w_upd@ted_s3kret",
      },
    ]);
    // As on the platform (supabase_vault 0.3), the owner writes secrets through the functions only.
    expect(
      await tenantSqlError(server, "insert into vault.secrets (secret)\nvalues ('s3kre3t_k3y') returning *;"),
    ).toMatch(/permission denied/);
  });

  it("Queues: pgmq's API as the docs show it", async () => {
    await example("create extension pgmq;");
    await example("select from pgmq.create('my_queue');");
    await example("select pgmq.create_unlogged('my_unlogged');");
    await example(`select * from pgmq.create_partitioned(
    'my_partitioned_queue',
    '100000',
    '10000000'
);`);
    expect(
      await example(`select * from pgmq.send_batch(
    'my_queue',
    array[
      '{"hello": "world_0"}'::jsonb,
      '{"hello": "world_1"}'::jsonb
    ]
);`),
    ).toEqual([{ send_batch: 1 }, { send_batch: 2 }]);
    expect(await example(`select * from pgmq.send('my_queue', '{"hello": "world"}');`)).toEqual([
      { send: 3 },
    ]);
    const read = await example("select * from pgmq.read('my_queue', 10, 2);");
    expect(read.map((m) => [m.msg_id, m.read_ct, m.message])).toEqual([
      [1, 1, { hello: "world_0" }],
      [2, 1, { hello: "world_1" }],
    ]);
    expect((await example("select * from pgmq.read_with_poll('my_queue', 1, 1, 5, 100);"))[0].msg_id).toBe(3);
    expect(await example("select * from pgmq.archive('my_queue', array[1, 999]);")).toEqual([{ archive: 1 }]);
    expect(await example("select pgmq.delete('my_queue', 2);")).toEqual([{ delete: true }]);
    expect((await example("select * from pgmq.set_vt('my_queue', 3, 0);"))[0].msg_id).toBe(3);
    expect((await example("select * from pgmq.pop('my_queue');"))[0].message).toEqual({ hello: "world" });
    await example(`select * from pgmq.send('my_queue', '{"hello": "world"}');`);
    expect(await example("select * from pgmq.purge_queue('my_queue');")).toEqual([{ purge_queue: 1 }]);
    expect(
      (await example("select * from pgmq.list_queues();")).map((q) => [
        q.queue_name,
        q.is_partitioned,
        q.is_unlogged,
      ]),
    ).toEqual([
      ["my_queue", false, false],
      ["my_unlogged", false, true],
      ["my_partitioned_queue", true, false],
    ]);
    expect(await example("select * from pgmq.metrics('my_queue');")).toEqual([
      expect.objectContaining({ queue_name: "my_queue", queue_length: 0, total_messages: 4 }),
    ]);
    expect((await example("select * from pgmq.metrics_all();")).length).toBe(3);
    expect(await example("select * from pgmq.drop_queue('my_unlogged');")).toEqual([{ drop_queue: true }]);
  });

  it("Broadcast from the database: the trigger recipe and realtime.send", async () => {
    await example(`create policy "Authenticated users can receive broadcasts"
on "realtime"."messages"
for select
to authenticated
using ( true );`);
    await example(`create table public.your_table (id bigint primary key, topic text);
create or replace function public.your_table_changes()
returns trigger
security definer
language plpgsql
as $$
begin
  perform realtime.broadcast_changes(
    'topic:' || coalesce(NEW.topic, OLD.topic) ::text, -- topic - the topic to which you're broadcasting where you can use the topic id to build the topic name
    TG_OP,                                             -- event - the event that triggered the function
    TG_OP,                                             -- operation - the operation that triggered the function
    TG_TABLE_NAME,                                     -- table - the table that caused the trigger
    TG_TABLE_SCHEMA,                                   -- schema - the schema of the table that caused the trigger
    NEW,                                               -- new record - the record after the change
    OLD                                                -- old record - the record before the change
  );
  return null;
end;
$$;
create trigger handle_your_table_changes
after insert or update or delete
on public.your_table
for each row
execute function your_table_changes ();
insert into public.your_table values (1, 'room-1');`);
    await example(`select
  realtime.send(
    jsonb_build_object('hello', 'world'), -- JSONB Payload
    'event', -- Event name
    'topic', -- Topic
    false -- Public / Private flag
  );`);
    const { rows } = await server.sql(
      "select topic, event, private, payload->'record' as record from realtime.messages order by inserted_at",
    );
    expect(rows).toEqual([
      { topic: "topic:room-1", event: "INSERT", private: true, record: { id: 1, topic: "room-1" } },
      { topic: "topic", event: "event", private: false, record: null },
    ]);
  });
});

it("records a module's extension as the platform does, and refuses one that is not available", async () => {
  expect(
    await tenantSql(
      server,
      `-- enable
       create extension if not exists "pg_net" with schema "extensions" cascade;
       select 'create extension pg_net' as text`,
    ),
  ).toEqual([{ text: "create extension pg_net" }]);
  expect(await tenantSqlError(server, "create extension pg_nonesuch")).toMatch(/not available/);
  // Strata's extension of that name (src/db/installation.ts), which owns nothing.
  expect(
    await tenantSql(
      server,
      `select e.extname, n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
        where e.extname = 'pg_net'`,
    ),
  ).toEqual([{ extname: "pg_net", nspname: "extensions" }]);
});
