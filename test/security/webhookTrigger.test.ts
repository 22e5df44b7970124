import { chmodSync, existsSync, readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { allowLoopbackForTests } from "../../src/net/outbound";
import { startTestServer, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { until } from "../helpers/until";
import { mgmt } from "../management/client";
import { clientFor } from "../rest/fixtures";

// The webhook receiver listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

const projectSql = (name: string) => readFileSync(path.join(__dirname, "../../sql/project", name), "utf8");

/**
 * A database webhook turns the changed row into JSON with to_jsonb(), which calls the tenant's own casts: the
 * tenant's code must never run as a superuser there, nor anywhere else Strata's superuser connection goes.
 */
describe("Tenant code reached from the webhook trigger and Strata's own functions", () => {
  let server: TestServer;
  let base = "";
  const received: { url: string; body: any }[] = [];
  let receiver: http.Server;
  /** Where `id` writes if a program ever runs: PostgreSQL's OS user may write in it. */
  let marker = "";

  /** SQL as the tenant: the Management API's SQL endpoint, which runs as the project's owner. */
  const tenantSql = async (query: string) => {
    const res = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, { body: { query } });
    expect(res).toMatchObject({ status: 201 });
    return res.body;
  };
  /** Who ran the tenant's recorder, as the superuser reads it (a second channel). */
  const seen = async () =>
    (await server.sql("select via, who, session_who, superuser, program from public.seen order by via, who"))
      .rows;
  const hook = (table: string) => `
    create trigger ${table}_hook after insert or update on public.${table} for each row
      execute function supabase_functions.http_request('${base}/${table}', 'POST', '{}', '{}', '2000');`;

  beforeAll(async () => {
    server = await startTestServer();
    receiver = http.createServer((req, res) => {
      let text = "";
      req.on("data", (c) => (text += c));
      req.on("end", () => {
        received.push({ url: req.url!, body: JSON.parse(text) });
        res.writeHead(200).end("ok");
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    const dir = testTempDir("webhook-trigger-");
    chmodSync(dir, 0o777);
    marker = path.join(dir, "program-ran");
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/database/webhooks/enable`)).status).toBe(
      201,
    );
    // The recorder: notes who runs it, after trying what only a superuser may do (a program on the host).
    await tenantSql(`
      create table public.seen (via text, who text, session_who text, superuser boolean, program text);
      grant insert, select on public.seen to public;
      create function public.record_caller(via text) returns boolean language plpgsql as $$
      declare
        outcome text := 'ran';
      begin
        begin
          copy (select 1) to program 'id > ${marker}';
        exception when others then
          outcome := sqlstate;
        end;
        insert into public.seen values (via, current_user, session_user,
          (select rolsuper from pg_roles where rolname = current_user), outcome);
        return true;
      end $$;
      grant execute on function public.record_caller(text) to public;
    `);
  });
  afterAll(async () => {
    await server.stop();
    await new Promise((resolve) => receiver.close(resolve));
  });

  /** A tenant enum whose casts to json and jsonb run the recorder, labelled `via`. */
  const castType = (type: string, via: string) => `
    create type public.${type} as enum ('calm', 'stormy');
    create function public.${type}_json(v public.${type}) returns json language plpgsql as $$
      begin perform public.record_caller('${via}'); return to_json(v::text || '!'); end $$;
    create function public.${type}_jsonb(v public.${type}) returns jsonb language plpgsql as $$
      begin perform public.record_caller('${via}'); return to_jsonb(v::text || '!'); end $$;
    create cast (public.${type} as json) with function public.${type}_json(public.${type});
    create cast (public.${type} as jsonb) with function public.${type}_jsonb(public.${type});`;

  it("runs a tenant's cast, domain check, composite field and own trigger without superuser rights, and still delivers", async () => {
    await tenantSql(`
      ${castType("mood", "cast")}
      create table public.diary (id int primary key, mood public.mood);
      ${hook("diary")}

      ${castType("weather", "cast in a domain")}
      create domain public.checked_weather as public.weather check (public.record_caller('domain check'));
      create table public.forecast (id int primary key, weather public.checked_weather);
      ${hook("forecast")}

      ${castType("tone", "cast in a composite")}
      create type public.note as (tone public.tone, words text);
      create table public.notes (id int primary key, note public.note);
      ${hook("notes")}

      create function public.on_diary() returns trigger language plpgsql as $$
        begin perform public.record_caller('tenant trigger'); return new; end $$;
      create trigger diary_own after insert on public.diary for each row execute function public.on_diary();
      grant all on public.diary, public.forecast, public.notes to anon;
    `);
    // Written by the project's owner (SQL endpoint), by an app (the data API as anon) and by the superuser.
    await tenantSql(`
      insert into public.diary values (1, 'calm');
      insert into public.forecast values (1, 'stormy');
      insert into public.notes values (1, row('calm', 'hello'));
    `);
    expect((await clientFor(server).from("diary").insert({ id: 2, mood: "stormy" })).error).toBeNull();
    await server.sql("update public.notes set note = row('stormy', 'bye') where id = 1");

    const owner = `postgres_${server.ref}`;
    const rows = await seen();
    expect(rows.filter((r) => r.superuser !== false)).toEqual([]);
    expect(rows.filter((r) => r.program !== "42501")).toEqual([]);
    expect(existsSync(marker)).toBe(false);
    // The webhook's casts ran as its own role, even for the row the superuser changed (the composite); the
    // data API's own answer ran them as anon, the domain check and the tenant's trigger ran as the writer.
    expect(new Set(rows.filter((r) => r.via === "cast in a composite").map((r) => r.who))).toEqual(
      new Set(["strata_webhook_trigger"]),
    );
    expect(new Set(rows.filter((r) => r.via.startsWith("cast")).map((r) => r.who))).toEqual(
      new Set(["strata_webhook_trigger", "anon"]),
    );
    expect(new Set(rows.map((r) => r.via))).toEqual(
      new Set(["cast", "cast in a domain", "cast in a composite", "domain check", "tenant trigger"]),
    );
    expect(rows.filter((r) => r.via === "tenant trigger").map((r) => r.who)).toEqual(["anon", owner]);

    // The legitimate use: every change was delivered, with the tenant's casts applied to the record.
    const delivered = await until(() => (received.length >= 5 ? received : undefined));
    expect(delivered.map((d) => [d.url, d.body.type, d.body.record])).toEqual(
      expect.arrayContaining([
        ["/diary", "INSERT", { id: 1, mood: "calm!" }],
        ["/diary", "INSERT", { id: 2, mood: "stormy!" }],
        ["/forecast", "INSERT", { id: 1, weather: "stormy!" }],
        ["/notes", "INSERT", { id: 1, note: { tone: "calm!", words: "hello" } }],
        ["/notes", "UPDATE", { id: 1, note: { tone: "stormy!", words: "bye" } }],
      ]),
    );
    const responses = await until(async () => {
      const { rows } = await server.sql("select status_code from supabase_functions.http_responses");
      return rows.length === 5 ? rows : undefined;
    });
    expect(responses).toEqual(Array(5).fill({ status_code: 200 }));
  });

  it("gives the project no hold on the webhook tables: no trigger, no ownership, no writes", async () => {
    for (const table of ["http_request_queue", "http_responses", "hooks"]) {
      const attempt = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, {
        body: {
          query: `create trigger intruder before insert on supabase_functions.${table} for each row
                    execute function public.on_diary()`,
        },
      });
      expect(attempt.status).toBe(400);
      expect(attempt.body.message).toMatch(/permission denied|must be owner/);
    }
    for (const query of [
      "insert into supabase_functions.http_request_queue (method, url) values ('GET', 'http://example.com')",
      "alter function supabase_functions.http_request() security invoker",
      "create or replace function supabase_functions.http_request() returns trigger language plpgsql as $$ begin return null; end $$",
    ]) {
      expect(
        (await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, { body: { query } })).status,
      ).toBe(400);
    }
    // Read access stays, to see what the webhooks got back.
    expect(await tenantSql("select count(*)::int as n from supabase_functions.http_responses")).toEqual([
      { n: 5 },
    ]);
    // Opening the project again (as every start does) leaves the schema Strata's.
    await server.strata.ctx.registry.prepare(server.ref);
    const { rows } = await server.sql(`
      select pg_get_userbyid(n.nspowner) as schema_owner,
             (select array_agg(distinct pg_get_userbyid(relowner)::text) from pg_class where relnamespace = n.oid) as table_owners,
             (select count(*)::int from pg_trigger where tgrelid in (select oid from pg_class where relnamespace = n.oid)
                and not tgisinternal) as triggers
        from pg_namespace n where n.nspname = 'supabase_functions'`);
    expect(rows).toEqual([{ schema_owner: "postgres", table_owners: ["postgres"], triggers: 0 }]);
  });

  it("replaces the superuser's trigger function of a database that enabled webhooks before", async () => {
    // The state an earlier version left: 600's installer run, and the schema handed to the project's owner.
    const owner = `postgres_${server.ref}`;
    await server.sql(projectSql("600_webhooks.sql"));
    await server.sql("select _strata.enable_webhooks()");
    await server.sql(`
      alter schema supabase_functions owner to ${owner};
      alter table supabase_functions.http_responses owner to ${owner};
      alter table supabase_functions.http_request_queue owner to ${owner};
      alter table supabase_functions.hooks owner to ${owner};
      alter function supabase_functions.http_request() owner to postgres;`);
    expect(
      (
        await server.sql(
          "select prosecdef, pg_get_userbyid(proowner) as owner from pg_proc where proname = 'http_request'",
        )
      ).rows,
    ).toEqual([{ prosecdef: true, owner: "postgres" }]);
    // Meanwhile the owner attached its recorder to the responses Strata writes, every way a table allows.
    await tenantSql(`
      create function public.on_response() returns trigger language plpgsql as $$
        begin perform public.record_caller('response trigger'); return new; end $$;
      create function public.response_value() returns text language plpgsql as $$
        begin perform public.record_caller('response default'); return 'x'; end $$;
      create function public.response_check(t text) returns boolean language plpgsql immutable as $$
        begin perform public.record_caller('response check'); return true; end $$;
      create trigger intruder after insert on supabase_functions.http_responses for each row
        execute function public.on_response();
      create rule intruder_rule as on insert to supabase_functions.http_responses
        do also select public.response_value();
      alter table supabase_functions.http_responses enable row level security;
      alter table supabase_functions.http_responses force row level security;
      create policy intruder_policy on supabase_functions.http_responses using (public.response_check(content));
      alter table supabase_functions.http_responses add column extra text default public.response_value();
      alter table supabase_functions.http_responses alter column content_type set default public.response_value();
      alter table supabase_functions.http_responses add constraint intruder_check check (public.response_check(content));
      create index intruder_index on supabase_functions.http_responses (public.response_check(content));`);

    await server.sql(projectSql("610_webhooks_without_superuser.sql"));
    const { rows } = await server.sql(
      `
      select p.prosecdef, pg_get_userbyid(p.proowner) as function_owner, p.proconfig,
             pg_get_userbyid(n.nspowner) as schema_owner,
             has_table_privilege($1, 'supabase_functions.http_responses', 'insert, update, trigger') as owner_writes,
             has_schema_privilege($1, 'supabase_functions', 'create') as owner_creates
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace where p.proname = 'http_request'`,
      [owner],
    );
    expect(rows).toEqual([
      {
        prosecdef: true,
        function_owner: "strata_webhook_trigger",
        proconfig: ["search_path=pg_catalog, pg_temp"],
        schema_owner: "postgres",
        owner_writes: false,
        owner_creates: false,
      },
    ]);

    // None of what the owner attached is left on the tables.
    const left = await server.sql(
      `select (select count(*)::int from pg_trigger t join pg_class c on c.oid = t.tgrelid
                where c.relnamespace = 'supabase_functions'::regnamespace and not t.tgisinternal) as triggers,
              (select count(*)::int from pg_rewrite r join pg_class c on c.oid = r.ev_class
                where c.relnamespace = 'supabase_functions'::regnamespace and c.relkind = 'r') as rules,
              (select count(*)::int from pg_policy p join pg_class c on c.oid = p.polrelid
                where c.relnamespace = 'supabase_functions'::regnamespace) as policies,
              (select count(*)::int from pg_class c where c.relnamespace = 'supabase_functions'::regnamespace
                and (c.relrowsecurity or c.relforcerowsecurity)) as rls,
              (select count(*)::int from pg_attribute where attrelid = 'supabase_functions.http_responses'::regclass
                and attname = 'extra' and not attisdropped) as extra,
              (select count(*)::int from pg_index i where i.indrelid = 'supabase_functions.http_responses'::regclass
                and not i.indisprimary) as indexes,
              (select count(*)::int from pg_constraint where conrelid = 'supabase_functions.http_responses'::regclass
                and contype = 'c') as checks,
              (select count(*)::int from pg_attrdef where adrelid = 'supabase_functions.http_responses'::regclass
                and pg_get_expr(adbin, adrelid) like '%response_value%') as defaults`,
    );
    expect(left.rows).toEqual([
      { triggers: 0, rules: 0, policies: 0, rls: 0, extra: 0, indexes: 0, checks: 0, defaults: 0 },
    ]);

    // The webhook still fires, and nothing of the owner's runs when Strata records the answer.
    await server.sql("truncate public.seen");
    await tenantSql("insert into public.diary values (3, 'calm')");
    await until(() => received.find((d) => d.body.record?.id === 3));
    await until(
      async () =>
        (
          await server.sql(
            "select r.status_code from supabase_functions.http_responses r join supabase_functions.hooks h on h.request_id = r.id order by r.created desc limit 1",
          )
        ).rows[0]?.status_code ?? undefined,
    );
    expect((await seen()).filter((r) => r.via.startsWith("response"))).toEqual([]);
    expect(existsSync(marker)).toBe(false);
  });

  it("runs Strata's own role repairs without calling functions the tenant put in public", async () => {
    // Better matches than pg_catalog's format(text, variadic "any") for format('... %I ...', name) calls,
    // found through the superuser's default search_path ("$user", public) when nothing pins it.
    await server.sql("truncate public.seen");
    await tenantSql(`
      create function public.format(f text, a text) returns text language plpgsql as $$
        begin perform public.record_caller('format'); return pg_catalog.format(f, a); end $$;
      create function public.format(f text, a text, b text) returns text language plpgsql as $$
        begin perform public.record_caller('format'); return pg_catalog.format(f, a, b); end $$;
      grant execute on all functions in schema public to public;
    `);
    await server.strata.ctx.registry.prepare(server.ref);
    expect((await mgmt(server, "POST", `/v1/projects/${server.ref}/database/webhooks/enable`)).status).toBe(
      201,
    );
    await tenantSql("insert into public.diary values (4, 'calm')");
    await until(() => received.find((d) => d.body.record?.id === 4));
    expect((await seen()).filter((r) => r.via === "format")).toEqual([]);
    expect(existsSync(marker)).toBe(false);
  });
});
