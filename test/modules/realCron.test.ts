import { execFileSync } from "node:child_process";
import { appendFileSync, chmodSync, chownSync, existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { freePort } from "../../src/db/physical";
import { withDatabase } from "../../src/db/urls";
import { TEST_JWT_SECRET, TEST_KEK, TEST_MANAGEMENT_TOKEN, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { until } from "../helpers/until";
import { mgmt } from "../management/client";
import { PG15_BIN, PG15_CRON_LIBRARY } from "../setup/pgCron";
import { tenantSql } from "./sql";

const asRoot = process.getuid?.() === 0;

/** Runs a PostgreSQL program as the OS user `postgres` when this is root (PostgreSQL refuses root). */
function asPostgres(program: string, args: string[]): void {
  const [cmd, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", program, ...args]] : [program, args];
  execFileSync(cmd, argv, { stdio: "ignore", timeout: 60_000 });
}

/** A PostgreSQL 15 cluster that loads pg_cron for `database`, its jobs run by background workers. */
function cronCluster(database: string, port: number): string {
  const dir = testTempDir("strata-pgcron-");
  chmodSync(dir, 0o755);
  const pgdata = path.join(dir, "pgdata");
  mkdirSync(pgdata, { mode: 0o700 });
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }));
    chownSync(pgdata, id("-u"), id("-g"));
  }
  asPostgres(path.join(PG15_BIN, "initdb"), ["-D", pgdata, "-U", "postgres", "--auth=trust", "--no-sync"]);
  // Written as the OS user that made the file (root may write it; the cluster reads it).
  appendFileSync(
    path.join(pgdata, "postgresql.conf"),
    [
      "shared_preload_libraries = 'pg_cron,pg_stat_statements'",
      `cron.database_name = '${database}'`,
      "cron.use_background_workers = on",
      `port = ${port}`,
      "listen_addresses = '127.0.0.1'",
      "unix_socket_directories = ''",
      "fsync = off",
      "",
    ].join("\n"),
  );
  asPostgres(path.join(PG15_BIN, "pg_ctl"), ["-D", pgdata, "-w", "-l", path.join(pgdata, "log"), "start"]);
  return pgdata;
}

/**
 * The real pg_cron on a DATABASE_URL cluster (README "Real extensions"): a PostgreSQL 15 cluster loading Debian's
 * pg_cron 1.4 with `cron.database_name` naming DATABASE_URL's database, which is the default project's (a new
 * project's database is named for its ref, unknown before it is made, and `cron.database_name` takes a restart).
 * The project gets the extension and Strata says so; the owner schedules through the Management API's SQL; the
 * run is read back as the cluster's superuser and shows who ran it: pg_cron's background worker as the owner,
 * not Strata's scheduler (which logs in as the project's SQL login). Waits for the next minute's run (1.4 has
 * no 'N seconds'): up to about 70 s of the test's time.
 */
const available = existsSync(PG15_CRON_LIBRARY);
if (!available)
  console.warn(`The real pg_cron test is skipped: no ${PG15_CRON_LIBRARY} (postgresql-15-cron)`);
(available ? describe : describe.skip)("the cluster's own pg_cron", () => {
  const database = "strata_cron";
  const logs: { msg: string; ref?: string }[] = [];
  let pgdata = "";
  let strata: RunningStrata;
  let server: TestServer;
  let superuser: pg.Client;

  beforeAll(async () => {
    const port = await freePort();
    pgdata = cronCluster(database, port);
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    const setup = new pg.Client({ connectionString: url });
    await setup.connect();
    await setup.query(`create database ${database}`);
    await setup.end();
    const dbUrl = withDatabase(url, database);
    strata = await startStrata(
      loadConfig({
        DATABASE_URL: dbUrl,
        PORT: "0",
        JWT_SECRET: TEST_JWT_SECRET,
        MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
        STRATA_KEK: TEST_KEK,
        STRATA_DATA_DIR: testTempDir("strata-server-"),
      }),
      pino({ level: "info" }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    );
    superuser = new pg.Client({ connectionString: dbUrl });
    await superuser.connect();
    const fail = () => Promise.reject(new Error("not used here"));
    server = {
      url: `http://127.0.0.1:${strata.port}`,
      strata,
      ref: strata.info.ref,
      anonKey: strata.info.anon_key,
      serviceKey: strata.info.service_role_key,
      jwtSecret: strata.info.jwt_secret,
      managementToken: TEST_MANAGEMENT_TOKEN,
      dbUrl,
      sql: (text, params) => superuser.query(text, params),
      controlSql: fail,
      stop: fail,
    };
    // pg_cron's worker logs in as the job's role: the owner gets its login as README says.
    const set = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/database/password`, {
      body: { password: "real-cron-Pass-1" },
    });
    expect(set.status).toBe(200);
  }, 90_000); // an initdb, a cluster's start and a first start of Strata on it (both databases bootstrapped)

  afterAll(async () => {
    await superuser?.end();
    await strata?.stop();
    if (pgdata) asPostgres(path.join(PG15_BIN, "pg_ctl"), ["-D", pgdata, "-w", "-m", "immediate", "stop"]);
  });

  it("serves the project: Strata says so, the owner schedules, pg_cron runs the job and Strata's scheduler does not", async () => {
    const owner = `postgres_${server.ref}`;
    const served = await until(
      () =>
        logs.find((l) => l.msg === "database modules: the cluster's pg_cron extension serves this project"),
      20_000,
    );
    expect(served.ref).toBe(server.ref);
    const extension = await server.sql(
      `select extversion, _strata.extension_owns('pg_cron', 'cron.job') as owns from pg_extension
        where extname = 'pg_cron'`,
    );
    expect(extension.rows).toEqual([{ extversion: expect.stringMatching(/^1\.4/), owns: true }]);

    // The platform's docs enable it first: harmless where it is installed (kept as written, PostgreSQL skips it).
    await tenantSql(server, "create extension if not exists pg_cron with schema pg_catalog");
    await tenantSql(server, "create table public.ticks (who text, session_who text, backend text)");
    const [{ schedule: jobid }] = await tenantSql(
      server,
      `select cron.schedule('tick', '* * * * *', $$
         insert into public.ticks select current_user, session_user, backend_type
           from pg_stat_activity where pid = pg_backend_pid()
       $$)`,
    );
    const jobs = await server.sql("select jobid, jobname, username, database, active from cron.job");
    expect(jobs.rows).toEqual([
      { jobid: String(jobid), jobname: "tick", username: owner, database, active: true },
    ]);
    expect(
      (await server.sql("select count(*)::int as n from pg_extension where extname = 'pg_cron'")).rows,
    ).toEqual([{ n: 1 }]);

    const runs = await until(async () => {
      const { rows } = await server.sql(
        "select status, username from cron.job_run_details where jobid = $1",
        [jobid],
      );
      return rows.some((r) => r.status === "succeeded" || r.status === "failed") ? rows : undefined;
    }, 75_000);
    expect(runs[0]).toEqual({ status: "succeeded", username: owner });
    // Every run so far was pg_cron's, in a background worker logged in as the owner.
    const ticks = (await server.sql("select who, session_who, backend from public.ticks")).rows;
    expect(ticks.length).toBeGreaterThan(0);
    for (const tick of ticks) expect(tick).toEqual({ who: owner, session_who: owner, backend: "pg_cron" });
    expect(logs.filter((l) => /database modules: cron failed/.test(l.msg))).toEqual([]);

    await tenantSql(server, "select cron.unschedule('tick')");
    expect((await server.sql("select count(*)::int as n from cron.job")).rows).toEqual([{ n: 0 }]);
  }, 120_000); // up to a minute for the next minute's run
});
