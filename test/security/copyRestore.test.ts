import { chmodSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { withDatabase } from "../../src/db/urls";
import { createLogger } from "../../src/log";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_MANAGEMENT_TOKEN,
  type TestServer,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { mgmt } from "../management/client";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Superuser SQL on `url`. */
async function query(url: string, text: string): Promise<any[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

/** A directory the probe's program, run by the database server's own user, could make files in. */
function probeDir(): string {
  const dir = testTempDir("strata-probe-");
  chmodSync(dir, 0o777);
  return dir;
}

/**
 * The tenant's probe: records who runs it (current_user, session_user, superuser or not, the session's
 * application_name) and tries to run a program as the server, which only a superuser may: `touch <dir>/<tag>`.
 * It is built into everything a copy or a restore may evaluate: a CHECK, a column DEFAULT, a domain's CHECK,
 * a BEFORE INSERT trigger (enabled ALWAYS, so session_replication_role = replica would fire it), a cast to
 * json, an index expression, a view, a materialized view, a policy of a table forcing row security, and a
 * CHECK (by a function in storage, which a restore neither drops nor dumps) and a truncate trigger on
 * storage's buckets (a platform table the owner owns).
 */
function probeSchema(dir: string): string {
  return `
    create table public.probe_log (tag text, cur text, sess text, su boolean, app text);
    create function public.probe(tag text) returns boolean language plpgsql as $fn$
    begin
      begin
        insert into public.probe_log values (tag, current_user, session_user,
          current_setting('is_superuser')::boolean, current_setting('application_name'));
      exception when others then null; -- a read-only transaction
      end;
      begin
        execute format('copy (select 1) to program %L', 'touch ${dir}/' || tag);
      exception when others then null; -- not a superuser
      end;
      return true;
    end $fn$;
    create function public.probe_imm(n int) returns int language plpgsql immutable as $fn$
    begin perform public.probe('index'); return n; end $fn$;
    create function public.probe_trigger() returns trigger language plpgsql as $fn$
    begin perform public.probe(tg_name); return new; end $fn$;
    create domain public.probed_text as text check (public.probe('domain'));
    create type public.probe_mood as enum ('calm', 'loud');
    create function public.probe_mood_json(public.probe_mood) returns json language plpgsql as $fn$
    begin perform public.probe('cast'); return to_json($1::text); end $fn$;
    create cast (public.probe_mood as json) with function public.probe_mood_json(public.probe_mood);
    create table public.probed (
      id int primary key,
      n int not null,
      label public.probed_text,
      mood public.probe_mood,
      d boolean default public.probe('default'),
      check (public.probe('check'))
    );
    create index probed_n on public.probed (public.probe_imm(n));
    create trigger probed_insert before insert on public.probed for each row execute function public.probe_trigger();
    alter table public.probed enable always trigger probed_insert;
    create table public.probe_child (id int primary key, probed_id int references public.probed);
    create table public.probe_parts (id int primary key, probed_id int references public.probed) partition by range (id);
    create table public.probe_parts_low partition of public.probe_parts for values from (0) to (100);
    create table public.probe_parts_high partition of public.probe_parts for values from (100) to (1000);
    create trigger parts_insert before insert on public.probe_parts for each row execute function public.probe_trigger();
    create view public.probe_view as select public.probe('view') as p;
    create table public.probe_secret (id int primary key, visible boolean not null);
    alter table public.probe_secret enable row level security;
    alter table public.probe_secret force row level security;
    create policy shown on public.probe_secret for select using (public.probe('policy') and visible);
    create policy added on public.probe_secret for insert with check (true);
    create materialized view public.probe_mv as select public.probe('matview') as p;
  `;
}

/** Rows of the probe: added after the migration, as a tenant's data. */
const PROBE_ROWS = `
  insert into public.probed (id, n, label, mood) values (1, 10, 'one', 'calm'), (2, 20, 'two', 'loud');
  insert into public.probe_child values (1, 2);
  insert into public.probe_parts values (1, 1), (150, 2);
  insert into public.probe_secret values (1, true), (2, false), (3, true);
  insert into storage.buckets (id, name) values ('probe-bucket', 'probe-bucket');
  create function storage.probe_check() returns boolean language plpgsql as $fn$
  begin return public.probe('storage_check'); end $fn$;
  alter table storage.buckets add constraint probe_bucket check (storage.probe_check());
  create trigger probe_truncate before truncate on storage.buckets execute function public.probe_trigger();
  alter table storage.buckets enable always trigger probe_truncate;
`;

describe("Branch copies and restores run the tenant's code as the tenant, never as a superuser", () => {
  let server: TestServer;
  let dir: string;
  const owner = () => `postgres_${server.ref}`;
  const sql = (ref: string, query: string) =>
    mgmt(server, "POST", `/v1/projects/${ref}/database/query`, { body: { query } });
  /** Superuser SQL on a project's database of the test cluster. */
  const asSuperuser = (database: string, text: string) => query(withDatabase(server.dbUrl, database), text);
  const touched = () => readdirSync(dir).sort();

  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
    dir = probeDir();
    const migration = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/migrations`, {
      body: { name: "probes", query: probeSchema(dir) },
    });
    expect(migration.status).toBe(200);
    expect((await sql(server.ref, PROBE_ROWS)).status).toBe(201);
    const user = await fetch(`${server.url}/auth/v1/admin/users`, {
      method: "POST",
      headers: {
        apikey: server.serviceKey,
        authorization: `Bearer ${server.serviceKey}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ email: "kept@example.test", password: "Kept-pass-12345", email_confirm: true }),
    });
    expect(user.status).toBe(200);
    // The probe's second channel works: as a superuser it makes its file.
    await server.sql("select public.probe('control')");
    expect(touched()).toEqual(["control"]);
    await server.sql("delete from public.probe_log where tag = 'control'");
  });
  afterAll(async () => {
    const { rows } = await server.controlSql("select project_ref from platform.branches");
    for (const { project_ref } of rows) await mgmt(server, "DELETE", `/v1/branches/${project_ref}`);
    await server.stop();
  });

  it("refuses Strata's load functions to the tenant, who has no session key", async () => {
    for (const call of [
      "select _strata_load.truncate_platform_tables('guess', array['auth.users'])",
      "select _strata_load.drop_user_schemas('guess', array['public'])",
      "select _strata_load.stage('guess', 'auth.users', array['id'])",
      "select _strata_load.set_platform_sequence('guess', 'auth.refresh_tokens_id_seq', 1, false)",
    ]) {
      const res = await sql(server.ref, call);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/not a Strata load session/);
    }
    expect((await sql(server.ref, "select * from _strata_load.session_keys")).status).toBe(400);
    expect((await server.sql("select count(*)::int as n from auth.users")).rows[0].n).toBe(1);
  });

  it("refuses a foreign key to auth's tables compared through the tenant's own cast", async () => {
    // The key's check runs as auth.users' owner, a superuser: an implicit cast of the tenant's would run as it.
    expect(
      (
        await sql(
          server.ref,
          `create type public.probe_id as enum ('00000000-0000-0000-0000-000000000001');
           create function public.probe_id_uuid(public.probe_id) returns uuid language plpgsql as $fn$
           begin perform public.probe('fk_cast'); return $1::text::uuid; end $fn$;
           create cast (public.probe_id as uuid) with function public.probe_id_uuid(public.probe_id) as implicit;
           create domain public.probe_id_domain as public.probe_id;`,
        )
      ).status,
    ).toBe(201);
    for (const attempt of [
      "create table public.fk_cast (u public.probe_id references auth.users (id))",
      "create table public.fk_cast (u public.probe_id_domain references auth.users (id))",
      "create table public.fk_cast (u public.probe_id); alter table public.fk_cast add foreign key (u) references auth.users (id)",
      `create table public.fk_cast (u uuid references auth.users (id));
       alter table public.fk_cast alter column u type public.probe_id using u::text::public.probe_id`,
    ]) {
      const res = await sql(server.ref, attempt);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/compares a type of its own/);
      expect((await server.sql("select to_regclass('public.fk_cast') as t")).rows[0].t).toBeNull();
    }
    // Legitimate: the referenced type, or a domain over it.
    const keys = await sql(
      server.ref,
      `create domain public.user_id as uuid;
       create table public.fk_plain (u uuid references auth.users (id), d public.user_id references auth.users (id));
       drop table public.fk_plain; drop domain public.user_id;
       drop cast (public.probe_id as uuid); drop domain public.probe_id_domain;
       drop function public.probe_id_uuid(public.probe_id); drop type public.probe_id;`,
    );
    expect(keys.status).toBe(201);
    expect(touched()).toEqual(["control"]);
  });

  it("copies a branch's rows as its owners: no probe runs as a superuser, the rows arrive", async () => {
    const created = await mgmt(server, "POST", `/v1/projects/${server.ref}/branches`, {
      body: { branch_name: "probed", with_data: true },
    });
    expect(created.status).toBe(201);
    const ref: string = created.body.project_ref;
    const [run] = (await mgmt(server, "GET", `/v1/projects/${ref}/actions`)).body;
    let steps: { name: string; status: string }[] = [];
    for (let i = 0; i < 150; i++) {
      steps = (await mgmt(server, "GET", `/v1/projects/${ref}/actions/${run.id}`)).body.run_steps;
      if (steps.every((s) => s.status === "EXITED") || steps.some((s) => s.status === "DEAD")) break;
      await sleep(200);
    }
    const log = await (
      await fetch(`${server.url}/v1/projects/${ref}/actions/${run.id}/logs`, {
        headers: { authorization: `Bearer ${server.managementToken}` },
      })
    ).text();
    if (steps.some((s) => s.status !== "EXITED")) console.log(log);
    expect({ steps, log }).toMatchObject({ steps: steps.map((s) => ({ ...s, status: "EXITED" })) });
    expect(log).toMatch(/public\.probe_secret forces row level security/);

    const branchDb = `project_${ref}`;
    const probes = await asSuperuser(branchDb, "select tag, cur, sess, su, app from public.probe_log");
    // The branch's checks, domains and index expressions ran during the copy, as the branch's owner.
    const seeded = probes.filter((p) => p.app === "strata-branch-seed");
    expect(new Set(seeded.map((p) => p.tag))).toEqual(new Set(["check", "domain", "index"]));
    for (const p of seeded) expect(p).toMatchObject({ cur: `postgres_${ref}`, sess: `strata_sql_${ref}` });
    expect(probes.filter((p) => p.su)).toEqual([]);
    expect(touched()).toEqual(["control"]);

    // Legitimate: the rows, the auth user, the triggers and keys as they were.
    expect(
      await asSuperuser(branchDb, "select id, n, label, mood::text, d from public.probed order by id"),
    ).toEqual([
      { id: 1, n: 10, label: "one", mood: "calm", d: true },
      { id: 2, n: 20, label: "two", mood: "loud", d: true },
    ]);
    expect(await asSuperuser(branchDb, "select * from public.probe_child")).toEqual([
      { id: 1, probed_id: 2 },
    ]);
    // The policy ran as the parent's owner: the row it hides was not copied.
    expect(await asSuperuser(branchDb, "select id from public.probe_secret order by id")).toEqual([
      { id: 1 },
      { id: 3 },
    ]);
    expect(await asSuperuser(branchDb, "select email from auth.users")).toEqual([
      { email: "kept@example.test" },
    ]);
    expect(
      await asSuperuser(
        branchDb,
        `select (select tgenabled from pg_trigger where tgname = 'probed_insert') as trigger,
                (select condeferrable from pg_constraint where conname = 'probe_child_probed_id_fkey') as deferrable,
                (select relforcerowsecurity from pg_class where oid = 'public.probe_secret'::regclass) as forced`,
      ),
    ).toEqual([{ trigger: "A", deferrable: false, forced: true }]);
    // A partitioned table: every partition's rows, its triggers and keys (the partitions' copies too) back on.
    expect(await asSuperuser(branchDb, "select id, probed_id from public.probe_parts order by id")).toEqual([
      { id: 1, probed_id: 1 },
      { id: 150, probed_id: 2 },
    ]);
    expect(
      await asSuperuser(
        branchDb,
        `select (select array_agg(distinct tgenabled::text) from pg_trigger where tgname = 'parts_insert') as triggers,
                (select array_agg(distinct condeferrable) from pg_constraint
                  where conrelid in (select relid from pg_partition_tree('public.probe_parts')) and contype = 'f') as keys`,
      ),
    ).toEqual([{ triggers: ["O"], keys: [false] }]);
  });

  it("backs up and restores as the project's owner: no probe runs as a superuser, the rows come back", async () => {
    const base = `/v1/projects/${server.ref}/database/backups`;
    const started = await mgmt(server, "POST", base);
    expect(started.status).toBe(201);
    for (;;) {
      const b = (await mgmt(server, "GET", base)).body.backups.find((x: any) => x.id === started.body.id);
      if (b.status !== "RUNNING") {
        expect(b.status).toBe("COMPLETED");
        break;
      }
      await sleep(100);
    }
    await sleep(1100);
    const target = Math.floor(Date.now() / 1000);
    await sleep(1100);
    expect(
      (await sql(server.ref, "drop table public.probe_child, public.probe_parts; delete from public.probed"))
        .status,
    ).toBe(201);
    const restore = await mgmt(server, "POST", `${base}/restore-pitr`, {
      body: { recovery_time_target_unix: target },
    });
    expect(restore.status).toBe(201);
    let outcome: any;
    for (;;) {
      outcome = (await mgmt(server, "GET", `${base}/restores`)).body.at(-1);
      if (outcome.status !== "RUNNING") break;
      await sleep(100);
    }
    expect(outcome).toMatchObject({ status: "COMPLETED", error: null });

    const probes = (await server.sql("select tag, cur, sess, su, app from public.probe_log")).rows;
    const restored = probes.filter((p) => p.app.startsWith("strata-restore-"));
    // Checks (added back after the rows), domains, index builds, the materialized view and storage's check
    // ran during the restore, as the owner.
    expect(new Set(restored.map((p) => p.tag))).toEqual(
      new Set(["check", "domain", "index", "matview", "storage_check"]),
    );
    for (const p of restored) expect(p).toMatchObject({ cur: owner(), sess: `strata_sql_${server.ref}` });
    expect(probes.filter((p) => p.su)).toEqual([]);
    expect(touched()).toEqual(["control"]);

    // Legitimate: every row back (the dump reads past the policy), the user, the bucket, the owners.
    expect((await server.sql("select id, n, label from public.probed order by id")).rows).toEqual([
      { id: 1, n: 10, label: "one" },
      { id: 2, n: 20, label: "two" },
    ]);
    expect((await server.sql("select * from public.probe_child")).rows).toEqual([{ id: 1, probed_id: 2 }]);
    expect((await server.sql("select id from public.probe_parts order by id")).rows).toEqual([
      { id: 1 },
      { id: 150 },
    ]);
    expect((await server.sql("select id from public.probe_secret order by id")).rows).toEqual([
      { id: 1 },
      { id: 2 },
      { id: 3 },
    ]);
    expect((await server.sql("select email from auth.users")).rows).toEqual([{ email: "kept@example.test" }]);
    expect((await server.sql("select id from storage.buckets")).rows).toEqual([{ id: "probe-bucket" }]);
    const owners = await server.sql(
      `select distinct pg_get_userbyid(c.relowner) as owner from pg_class c
        where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'v', 'm', 'i', 'S')`,
    );
    expect(owners.rows).toEqual([{ owner: owner() }]);
    expect(
      (
        await server.sql(
          `select (select tgenabled from pg_trigger where tgname = 'probed_insert') as trigger,
                  (select relforcerowsecurity from pg_class where oid = 'public.probe_secret'::regclass) as forced,
                  (select count(*)::int from pg_trigger where tgname = 'probe_truncate') as storage_trigger`,
        )
      ).rows,
    ).toEqual([{ trigger: "A", forced: true, storage_trigger: 1 }]);
  });
});

// Strata with embedded clusters of its own (a second one, PostgreSQL 18, for the upgrade).
describe("An upgrade applies the dump as the project's owner", () => {
  let dataDir: string;
  let strata: RunningStrata;
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${strata.port}${p}`, {
      method,
      headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const freePort = () =>
    new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const port = (s.address() as { port: number }).port;
        s.close(() => resolve(port));
      });
    });

  beforeAll(async () => {
    dataDir = testTempDir("strata-upgrade-probe-");
    const env = {
      PORT: "0",
      STRATA_PG_PORT: String(await freePort()),
      STRATA_PG_UPGRADE_PORT: String(await freePort()),
      STRATA_DATA_DIR: dataDir,
      MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
      STRATA_KEK: "test-key-encryption-key-of-at-least-32-chars",
    };
    strata = await startStrata(loadConfig(env), createLogger("silent"));
  }, 120_000);
  afterAll(async () => {
    await strata?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it("runs no probe as a superuser while moving a project to PostgreSQL 18; the rows come along", async () => {
    const dir = probeDir();
    const created = await call("POST", "/v1/projects", {
      name: "probed",
      organization_slug: "default-org",
      db_pass: "Probed-Pass-123",
    });
    const ref: string = created.body.ref;
    for (let i = 0; i < 150; i++) {
      if ((await call("GET", `/v1/projects/${ref}`)).body.status === "ACTIVE_HEALTHY") break;
      await sleep(200);
    }
    const sql = (q: string) => call("POST", `/v1/projects/${ref}/database/query`, { query: q });
    expect((await sql(probeSchema(dir))).status).toBe(201);
    expect((await sql(PROBE_ROWS)).status).toBe(201);
    const adminUrl = async () => (await strata.ctx.registry.get(ref))!.record.adminUrl;
    await query(await adminUrl(), "select public.probe('control')");
    expect(readdirSync(dir)).toEqual(["control"]);

    const started = await call("POST", `/v1/projects/${ref}/upgrade`, { target_version: "18" });
    expect(started.status).toBe(201);
    let status: any;
    for (let i = 0; i < 600; i++) {
      status = (
        await call("GET", `/v1/projects/${ref}/upgrade/status?tracking_id=${started.body.tracking_id}`)
      ).body.databaseUpgradeStatus;
      if (status.status !== 0) break;
      await sleep(100);
    }
    expect(status).toMatchObject({ status: 1, progress: "9_completed_upgrade" });

    const upgraded = await adminUrl();
    const probes = await query(
      upgraded,
      "select tag, cur, su, app from public.probe_log where tag <> 'control'",
    );
    const moved = probes.filter((p) => p.app.startsWith("strata-upgrade-"));
    expect(new Set(moved.map((p) => p.tag))).toEqual(new Set(["check", "domain", "index", "matview"]));
    for (const p of moved) expect(p).toMatchObject({ cur: `postgres_${ref}`, su: false });
    expect(probes.filter((p) => p.su)).toEqual([]);
    expect(readdirSync(dir)).toEqual(["control"]);
    expect(await query(upgraded, "select id, n, label from public.probed order by id")).toEqual([
      { id: 1, n: 10, label: "one" },
      { id: 2, n: 20, label: "two" },
    ]);
    expect((await query(upgraded, "select version() as v"))[0].v).toMatch(/^PostgreSQL 18\./);
  }, 120_000);
});
