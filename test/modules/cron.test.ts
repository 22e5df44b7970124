import { chmodSync, existsSync } from "node:fs";
import path from "node:path";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import {
  startTestServer,
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_JWT_SECRET,
  TEST_KEK,
  type TestServer,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { until } from "../helpers/until";
import { mgmt } from "../management/client";
import { pruneRuns } from "../../src/jobs/modules/cron";
import { tenantSql, tenantSqlError } from "./sql";

/**
 * cron through SQL as the platform's clients write it (the Management API's SQL runs as the project's owner),
 * with two Strata nodes of one installation up: each job's slots are claimed once across both, and what a job
 * did is read back as the superuser (a second channel).
 */
describe("cron", () => {
  let server: TestServer;
  let second: RunningStrata;
  let owner = "";

  const runsOf = async (job: string) =>
    (
      await server.sql(
        `select d.* from cron.job_run_details d join cron.job j using (jobid) where j.jobname = $1 order by runid`,
        [job],
      )
    ).rows;

  beforeAll(async () => {
    server = await startTestServer();
    // A second node of the same installation: the same database and key-encryption key.
    second = await startStrata(
      loadConfig({
        DATABASE_URL: server.dbUrl,
        PORT: "0",
        JWT_SECRET: TEST_JWT_SECRET,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        STRATA_KEK: TEST_KEK,
        STRATA_DATA_DIR: testTempDir("strata-node2-"),
      }),
      createLogger("silent"),
    );
    owner = `postgres_${server.ref}`;
    await tenantSql(
      server,
      `create table public.ticks (id serial primary key, slot timestamptz, who text, session_who text);
       create table public.sentinel (id serial primary key);`,
    );
  }, 60_000);

  afterAll(async () => {
    await second.stop();
    await server.stop();
  });

  it("runs a job every second as the role that scheduled it, once per slot across two nodes, until unscheduled", async () => {
    const [{ schedule: jobid }] = await tenantSql(
      server,
      `select cron.schedule('tick', '1 seconds', $$
         insert into public.ticks (slot, who, session_who)
         select last_slot, current_user, session_user from cron._job_state
          where jobid = (select jobid from cron.job where jobname = 'tick')
       $$)`,
    );
    // The slot each run was claimed for, which the job reads back (the test's own grant, as the superuser).
    await server.sql(`grant select on cron._job_state to ${owner}`);
    expect(Number(jobid)).toBeGreaterThan(0);
    await until(
      async () =>
        (await runsOf("tick")).filter((r) => r.status === "succeeded").length >= 6 ? true : undefined,
      30_000,
    );

    const ticks = (await server.sql("select slot, who, session_who from public.ticks order by id")).rows;
    expect(ticks.length).toBeGreaterThanOrEqual(6);
    // Once per slot, whichever node claimed it.
    const slots = ticks.map((t) => new Date(t.slot).getTime());
    expect(new Set(slots).size).toBe(slots.length);
    // As the job's role (the project's owner), on the project's SQL login, never a superuser.
    expect(new Set(ticks.map((t) => t.who))).toEqual(new Set([owner]));
    expect(new Set(ticks.map((t) => t.session_who))).toEqual(new Set([`strata_sql_${server.ref}`]));

    const run = (await runsOf("tick")).find((r) => r.status === "succeeded")!;
    expect(run).toMatchObject({
      username: owner,
      database: expect.any(String),
      return_message: "INSERT 0 1",
    });
    expect(run.job_pid).toEqual(expect.any(Number));
    expect(new Date(run.end_time).getTime()).toBeGreaterThanOrEqual(new Date(run.start_time).getTime());
    // The owner reads its own jobs and runs, as with pg_cron.
    const [seen] = await tenantSql(
      server,
      "select (select count(*) from cron.job) as jobs, (select count(*) from cron.job_run_details) > 0 as runs",
    );
    expect(seen).toEqual({ jobs: 1, runs: true });

    // Unscheduled: no run after it, however long the scheduler keeps going (a sentinel job shows it does).
    await tenantSql(server, "select cron.unschedule('tick')");
    const after = (await server.sql("select count(*)::int as n from public.ticks")).rows[0].n;
    await tenantSql(
      server,
      "select cron.schedule('sentinel', '1 seconds', 'insert into public.sentinel default values')",
    );
    await until(async () =>
      (await server.sql("select count(*)::int as n from public.sentinel")).rows[0].n >= 3 ? true : undefined,
    );
    expect((await server.sql("select count(*)::int as n from public.ticks")).rows[0].n).toBe(after);
    await tenantSql(server, "select cron.unschedule('sentinel')");
    await server.sql(`revoke select on cron._job_state from ${owner}`);
  }, 60_000);

  it("accepts pg_cron's schedules and refuses what pg_cron refuses", async () => {
    const [named] = await tenantSql(server, "select cron.schedule('nightly', '30 3 * * *', 'vacuum') as id");
    const [again] = await tenantSql(server, "select cron.schedule('nightly', '@daily', 'select 1') as id");
    expect(again.id).toBe(named.id);
    await tenantSql(server, `select cron.alter_job(${named.id}, schedule := '0 12 $ * *', active := false)`);
    expect(
      await tenantSql(server, "select schedule, command, active from cron.job where jobname = 'nightly'"),
    ).toEqual([{ schedule: "0 12 $ * *", command: "select 1", active: false }]);
    for (const schedule of ["61 seconds", "* * * *", "60 * * * *", "*/0 * * * *", "@reboot", "every minute"])
      expect(await tenantSqlError(server, `select cron.schedule('${schedule}', 'select 1')`)).toMatch(
        /invalid schedule/,
      );
    // Another role's job, another database, a role that may not connect: refused whichever way it is written.
    expect(
      await tenantSqlError(
        server,
        "insert into cron.job (schedule, command, username) values ('* * * * *', 'x', 'postgres')",
      ),
    ).toMatch(/must be superuser to create a job for another role/);
    expect(
      await tenantSqlError(server, `select cron.alter_job(${named.id}, username := 'postgres')`),
    ).toMatch(/must be superuser/);
    expect(await tenantSqlError(server, "update cron.job set username = 'postgres'")).toMatch(
      /must be superuser/,
    );
    expect(
      await tenantSqlError(
        server,
        "select cron.schedule_in_database('x', '* * * * *', 'select 1', 'postgres')",
      ),
    ).toMatch(/jobs run in this project's database/);
    // anon, authenticated and service_role have no cron of their own; granted it by the owner, a role that may not
    // connect to the database still has no job, as with pg_cron.
    for (const role of ["anon", "authenticated", "service_role"])
      expect(
        (await server.sql(`select has_schema_privilege('${role}', 'cron', 'usage') as u`)).rows[0].u,
      ).toBe(false);
    await tenantSql(
      server,
      `grant usage on schema cron to anon; grant insert, select on cron.job to anon;
       grant usage on sequence cron.jobid_seq to anon; grant execute on function cron.schedule(text, text) to anon`,
    );
    expect(
      await tenantSqlError(server, "set role anon; select cron.schedule('* * * * *', 'select 1')"),
    ).toMatch(/does not have CONNECT privilege/);
    await tenantSql(server, `select cron.unschedule(${named.id})`);
    expect(await tenantSqlError(server, `select cron.unschedule(${named.id})`)).toMatch(
      /could not find valid entry/,
    );
  });

  it("runs a job's command with no more rights than its role, and fails a job its login may not run", async () => {
    const dir = testTempDir("cron-program-");
    chmodSync(dir, 0o777);
    const marker = path.join(dir, "program-ran");
    await tenantSql(
      server,
      `create table public.escape (via text, who text, superuser boolean);
       select cron.schedule('escape', '1 seconds', $$
         reset role;
         do $d$ begin
           copy (select 1) to program 'id > ${marker}';
           insert into public.escape values ('program', 'ran', null);
         exception when others then
           insert into public.escape values ('program', sqlstate, null);
         end $d$;
         insert into public.escape select 'reset role', current_user, rolsuper from pg_roles where rolname = current_user;
       $$);`,
    );
    // A job the owner could not write (the superuser's, as a forged row would be), to be run as `postgres`.
    await server.sql(
      `insert into cron.job (schedule, command, username, jobname)
       values ('1 seconds', 'insert into public.escape values (''forged'', current_user, true)', 'postgres', 'forged')`,
    );
    const outcome = await until(async () => {
      const runs = (
        await server.sql(
          `select j.jobname, d.status, d.return_message from cron.job_run_details d join cron.job j using (jobid)
            where j.jobname in ('escape', 'forged') and d.status in ('succeeded', 'failed')`,
        )
      ).rows;
      return new Set(runs.map((r) => r.jobname)).size === 2 ? runs : undefined;
    }, 30_000);
    await tenantSql(server, "select cron.unschedule('escape')");
    await server.sql("delete from cron.job where jobname = 'forged'");
    expect(outcome.find((r) => r.jobname === "escape").status).toBe("succeeded");
    expect(outcome.find((r) => r.jobname === "forged")).toMatchObject({
      status: "failed",
      return_message: expect.stringMatching(/permission denied to set role/),
    });
    // `reset role` reached the SQL login, no superuser; no program ran; the forged job never ran as postgres.
    const escaped = (await server.sql("select distinct via, who, superuser from public.escape order by via"))
      .rows;
    expect(escaped).toEqual([
      { via: "program", who: "42501", superuser: null },
      { via: "reset role", who: `strata_sql_${server.ref}`, superuser: false },
    ]);
    expect(existsSync(marker)).toBe(false);
    // The owner does not see the superuser's job.
    expect(await tenantSql(server, "select count(*)::int as n from cron.job")).toEqual([{ n: 0 }]);
  }, 60_000);

  it("keeps its bookkeeping out of the tenant's reach", async () => {
    for (const query of [
      "create trigger spy before insert on cron.job_run_details for each row execute function pg_catalog.suppress_redundant_updates_trigger()",
      "create policy everything on cron.job using (true)",
      "alter table cron.job disable trigger cron_job_guard",
      "drop trigger cron_job_guard on cron.job",
      "create or replace function cron.schedule(schedule text, command text) returns bigint language sql as 'select 1::bigint'",
      "create function cron.extra() returns int language sql as 'select 1'",
      "update cron._job_state set last_slot = now() - interval '1 day'",
      "select * from cron._job_state",
    ])
      expect(await tenantSqlError(server, query)).toMatch(/permission denied|must be owner/);
  });

  it("records as failed the run of a node that stopped, and prunes old runs", async () => {
    const [{ id }] = await tenantSql(server, "select cron.schedule('stuck', '@yearly', 'select 1') as id");
    // As a node that stopped mid-run leaves it: a run still `running`, its lease over.
    await server.sql(
      `insert into cron.job_run_details (jobid, username, database, command, status, start_time)
       values ($1, $2, current_database(), 'select 1', 'running', now() - interval '2 minutes')`,
      [id, owner],
    );
    await server.sql(
      "update cron._job_state set lease_until = now() - interval '1 second' where jobid = $1",
      [id],
    );
    const stopped = await until(async () => {
      const { rows } = await server.sql(
        "select status, return_message from cron.job_run_details where jobid = $1",
        [id],
      );
      return rows[0]?.status === "failed" ? rows[0] : undefined;
    });
    expect(stopped.return_message).toMatch(/stopped before it ended/);

    await server.sql(
      `insert into cron.job_run_details (jobid, username, status, end_time)
       select $1, $2, 'succeeded', now() - interval '8 days' from generate_series(1, 3)`,
      [id, owner],
    );
    const project = (await server.strata.ctx.registry.get(server.ref))!;
    await pruneRuns(project);
    const left = (
      await server.sql("select count(*)::int as n from cron.job_run_details where jobid = $1", [id])
    ).rows;
    expect(left).toEqual([{ n: 1 }]);
    await tenantSql(server, "select cron.unschedule('stuck')");
  });

  it("takes cron.log_statement through the Management API, per project database", async () => {
    const path_ = `/v1/projects/${server.ref}/config/database/postgres`;
    expect((await mgmt(server, "GET", path_)).body["cron.log_statement"]).toBe(true);
    expect((await mgmt(server, "PUT", path_, { body: { "cron.log_statement": false } })).status).toBe(200);
    expect((await mgmt(server, "GET", path_)).body["cron.log_statement"]).toBe(false);
    const { rows } = await server.sql(
      `select s.setconfig from pg_db_role_setting s join pg_database d on d.oid = s.setdatabase
        where d.datname = current_database() and s.setrole = 0`,
    );
    expect(rows[0].setconfig).toContain("cron.log_statement=off");
  });
});
