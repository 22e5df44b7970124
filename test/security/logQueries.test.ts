import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { withCredentials } from "../../src/db/urls";
import { LOG_READER, logReaderPassword } from "../../src/logs/query";
import { loadKek } from "../../src/platform/kek";
import { controlUrlOf } from "../helpers/db";
import { startTestServer, TEST_KEK, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { mgmt, waitForStatus } from "../management/client";

/**
 * Log queries (`analytics/endpoints/logs?sql=`) as an attacker writes them: an OAuth application holding only
 * `analytics:read` on its own project tries to escape the query into other statements, other roles, the
 * server's files and programs, the control plane and another project's events. Each attempt is refused in
 * the API's format, and the superuser's view of the cluster shows it left nothing behind.
 */

const REDIRECT = "https://logs.example.test/callback";

/** An OAuth access token of an application registered with the one scope `analytics:read`. */
async function analyticsReadToken(server: TestServer): Promise<string> {
  const app = await mgmt(server, "POST", "/v1/organizations/default-org/oauth/apps", {
    body: { name: "log viewer", redirect_uris: [REDIRECT], scopes: ["analytics:read"] },
  });
  expect(app.status).toBe(201);
  const verifier = randomBytes(48).toString("base64url");
  const query = new URLSearchParams({
    client_id: app.body.client_id,
    redirect_uri: REDIRECT,
    response_type: "code",
    scope: "analytics:read",
    organization_slug: "default-org",
    code_challenge: createHash("sha256").update(verifier).digest("base64url"),
    code_challenge_method: "S256",
  });
  const authorized = await fetch(`${server.url}/v1/oauth/authorize?${query}`, {
    headers: { authorization: `Bearer ${server.managementToken}` },
    redirect: "manual",
  });
  const code = new URL(authorized.headers.get("location")!).searchParams.get("code")!;
  const exchanged = await fetch(`${server.url}/v1/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_id: app.body.client_id,
      client_secret: app.body.client_secret,
    }).toString(),
  });
  expect(exchanged.status).toBe(200);
  return ((await exchanged.json()) as { access_token: string }).access_token;
}

describe("log queries are confined to the project's log views", () => {
  let server: TestServer;
  let token: string;
  let victim: string;
  let controlUrl: string;
  /** A directory the cluster's OS user may write in, where a program run by an attack would leave a file. */
  let dropDir: string;
  const ownMarker = `own-event-${randomBytes(4).toString("hex")}`;
  const victimMarker = `victim-secret-${randomBytes(4).toString("hex")}`;

  const logs = (sql: string, ref = server.ref) =>
    mgmt(
      server,
      "GET",
      `/v1/projects/${ref}/analytics/endpoints/logs?${new URLSearchParams({
        sql,
        iso_timestamp_start: new Date(Date.now() - 10 * 60_000).toISOString(),
        iso_timestamp_end: new Date(Date.now() + 60_000).toISOString(),
      })}`,
      { token },
    );

  /** Asserts the attempt was refused with the API's error body, and answered nothing of the victim's. */
  async function refused(sql: string) {
    const res = await logs(sql);
    expect({ sql, status: res.status, message: typeof res.body?.message }).toEqual({
      sql,
      status: 400,
      message: "string",
    });
    expect(JSON.stringify(res.body)).not.toContain(victimMarker);
    return res.body.message as string;
  }

  /** What the attacks below would leave if any of them ran, seen by the superuser. */
  async function traces() {
    const control = await server.controlSql(
      `select to_regclass('platform.pwned') as control_table, to_regclass('public.pwned') as public_table,
              to_regprocedure('public.pwn()') as fn, to_regprocedure('logs.pwn()') as logs_fn,
              (select count(*)::int from pg_extension where extname = 'dblink') as dblink,
              (select name from platform.projects where ref = $1) as victim_name,
              (select count(*)::int from platform.log_events where event_message like 'pwned%') as events`,
      [victim],
    );
    const main = await server.sql("select to_regclass('public.pwned') as main_table");
    const reader = await server.controlSql(
      "select rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolbypassrls from pg_roles where rolname = $1",
      [LOG_READER],
    );
    return {
      ...control.rows[0],
      ...main.rows[0],
      reader: reader.rows[0],
      file: existsSync(path.join(dropDir, "pwned")),
    };
  }
  const clean = () => ({
    control_table: null,
    public_table: null,
    fn: null,
    logs_fn: null,
    dblink: 0,
    victim_name: "victim",
    events: 0,
    main_table: null,
    reader: {
      rolsuper: false,
      rolinherit: false,
      rolcreaterole: false,
      rolcreatedb: false,
      rolbypassrls: false,
    },
    file: false,
  });

  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
    controlUrl = controlUrlOf(server.dbUrl);
    dropDir = testTempDir("strata-logq-");
    chmodSync(dropDir, 0o777);
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "victim", organization_slug: "default-org", db_pass: "victim-password-1" },
    });
    victim = created.body.ref;
    await waitForStatus(server, victim, "ACTIVE_HEALTHY");
    await server.controlSql(
      `insert into platform.log_events (project_ref, source, event_message)
       values ($1, 'edge_logs', $2), ($3, 'edge_logs', $4)`,
      [server.ref, ownMarker, victim, victimMarker],
    );
    token = await analyticsReadToken(server);
  });
  afterAll(() => server.stop());

  it("answers the project's own events and none of another project's, as the reader role", async () => {
    const own = await logs("select event_message from edge_logs where event_message like '%-event-%'");
    expect(own).toMatchObject({ status: 200, body: { error: null, result: [{ event_message: ownMarker }] } });
    const all = await logs("select event_message from edge_logs");
    expect(JSON.stringify(all.body)).not.toContain(victimMarker);
    // The other project's own query sees its event: the scope is the project asked for, not a fixed one.
    const theirs = await mgmt(
      server,
      "GET",
      `/v1/projects/${victim}/analytics/endpoints/logs?${new URLSearchParams({
        sql: "select event_message from edge_logs",
        iso_timestamp_start: new Date(Date.now() - 10 * 60_000).toISOString(),
      })}`,
    );
    expect(theirs.body.result).toEqual([{ event_message: victimMarker }]);
    const who = await logs(
      "select current_user as u, session_user as s, current_setting('transaction_read_only') as ro",
    );
    expect(who.body.result).toEqual([{ u: LOG_READER, s: LOG_READER, ro: "on" }]);
  });

  it("runs the text on the reader's own login, never on Strata's superuser connection", async () => {
    const marker = `m${randomBytes(6).toString("hex")}`;
    const pending = logs(`select pg_sleep(2), '${marker}' as marker`);
    // Second channel: the cluster's list of running statements, read by the superuser while it runs.
    let running: { usename: string; datname: string; rolsuper: boolean }[] = [];
    for (let i = 0; i < 200 && !running.length; i++) {
      running = (
        await server.controlSql(
          `select a.usename, a.datname, r.rolsuper from pg_stat_activity a join pg_roles r on r.oid = a.usesysid
            where a.query like '%' || $1 || '%' and a.pid <> pg_backend_pid()`,
          [marker],
        )
      ).rows;
      if (!running.length) await new Promise((r) => setTimeout(r, 20));
    }
    expect(running).toEqual([
      { usename: LOG_READER, datname: new URL(controlUrl).pathname.slice(1), rolsuper: false },
    ]);
    expect((await pending).status).toBe(200);
  });

  it("refuses a second statement, whatever closes the wrapper, and role or session changes", async () => {
    const file = path.join(dropDir, "pwned");
    for (const sql of [
      "select 1; select 2",
      `select 1) x; copy (select 1) to program 'touch ${file}'; select (1`,
      `select 1) x; reset role; copy (select 1) to program 'touch ${file}'; select * from (select 1`,
      `select 1) x; reset role; copy platform.projects to program 'touch ${file}'; --`,
      "select 1) x; set role postgres; create table platform.pwned (id int); select * from (select 1",
      "select 1) x; set session authorization postgres; create table public.pwned (id int); select * from (select 1",
      "select 1) x; commit; create table public.pwned (id int); begin; select * from (select 1",
      "commit; create table public.pwned (id int)",
      `select 1) x; rollback; update platform.projects set name = 'pwned' where ref = '${victim}'; select (1`,
      "select 1) x; create table public.pwned (id int); /*",
      "reset role",
      "set role postgres",
      "set session authorization postgres",
      "set strata.log_ref = 'abcdefghijabcdefghij'",
      `copy (select 1) to program 'touch ${file}'`,
      "select 1 $$; create table public.pwned (id int); $$",
    ])
      await refused(sql);
    // A comment cannot reach the wrapper's end (it starts on a line of its own): these are one query.
    for (const sql of [
      "select 1 as one -- ) x; create table public.pwned (id int)",
      "select 1 as one /* ) x; create table public.pwned (id int); -- */",
    ])
      expect((await logs(sql)).body).toEqual({ result: [{ one: 1 }], error: null });
    expect(await traces()).toEqual(clean());
  });

  it("refuses the server's files and programs, the control plane, extensions and new functions", async () => {
    expect(await refused("select pg_read_file('/etc/passwd')")).toMatch(/permission denied/);
    await refused("select * from pg_ls_dir('.')");
    await refused("select lo_import('/etc/passwd')");
    expect(await refused("select jwt_secret from platform.projects")).toMatch(/permission denied/);
    await refused("select * from platform.log_events");
    await refused("select * from platform.access_tokens");
    await refused("select * from _strata.bootstrap");
    await refused("select * from dblink('dbname=postgres', 'select 1') as t(x int)");
    await refused("select 1) x; create extension dblink; select (1");
    await refused(
      "select 1) x; create function public.pwn() returns int language sql as 'select 1'; select public.pwn() from (select 1",
    );
    await refused(
      "select 1) x; create function logs.pwn() returns void language sql set strata.log_ref = 'x' as ''; select (1",
    );
    await refused(
      "with w as (insert into platform.log_events (project_ref, source, event_message) values ('x', 'edge_logs', 'pwned') returning 1) select * from w",
    );
    // What reaches other sessions: NOTIFY to Strata's listeners, other readers' statements, their ends, locks.
    await refused("select pg_notify('strata_hostnames_changed', '')");
    await refused("select query from pg_stat_activity");
    await refused("select pg_terminate_backend(pid) from generate_series(1, 2) pid");
    await refused("select pg_advisory_lock(7305001)");
    expect(await traces()).toEqual(clean());
    // Second channel for what leaves no object: the reader's privileges, as the superuser sees them.
    const privileges = await server.controlSql(
      `select bool_or(has_function_privilege($1, p.oid, 'execute')) as any
         from pg_proc p where p.proname in ('set_config', 'pg_notify', 'pg_terminate_backend', 'pg_cancel_backend',
           'pg_advisory_lock', 'pg_read_file', 'pg_stat_get_activity')`,
      [LOG_READER],
    );
    expect(privileges.rows[0].any).toBe(false);
    // Nor can it call a function that runs as another role or changes settings (a SET clause).
    const reachable = await server.controlSql(
      `select count(*)::int as n from pg_proc p
        where (p.prosecdef or p.proconfig is not null) and has_function_privilege($1, p.oid, 'execute')
          and has_schema_privilege($1, p.pronamespace, 'usage')`,
      [LOG_READER],
    );
    expect(reachable.rows[0].n).toBe(0);
  });

  it("keeps the scope: set_config and a changed ref read nothing of another project", async () => {
    for (const sql of [
      `select set_config('strata.log_ref', '${victim}', false)`,
      `select set_config('strata.log_ref', '${victim}', true), * from edge_logs`,
      `select * from edge_logs, lateral (select set_config('strata.log_ref', '${victim}', true)) s`,
      `select set_config('strata.log_start', '2000-01-01', true)`,
      `select set_config('role', 'postgres', true)`,
      `select 1) x; set strata.log_ref = '${victim}'; select * from (select * from edge_logs`,
      `select 1) x; select set_config('strata.log_ref', '${victim}', false); select * from (table edge_logs`,
    ])
      await refused(sql);
    // The scope the views read is the one Strata set, whatever the query asks.
    const scope = await logs(
      "select current_setting('strata.log_ref') as ref, count(*)::int as n from edge_logs where event_message like '%secret%'",
    );
    expect(scope.body.result).toEqual([{ ref: server.ref, n: 0 }]);
  });

  it("gives the reader a login that can read the log views and nothing else, anywhere", async () => {
    const password = logReaderPassword(loadKek("", TEST_KEK));
    const connectTo = async (url: string) => {
      const client = new pg.Client({ connectionString: withCredentials(url, LOG_READER, password) });
      client.on("error", () => {});
      await client.connect();
      return client;
    };
    // Logged in by hand, without the session settings Strata sends: the role's own defaults still hold.
    const reader = await connectTo(controlUrl);
    const attempt = (sql: string) =>
      reader.query(sql).then(
        () => "ran",
        (e: Error) => e.message,
      );
    try {
      expect((await reader.query("show default_transaction_read_only")).rows[0]).toEqual({
        default_transaction_read_only: "on",
      });
      expect((await reader.query("show statement_timeout")).rows[0]).toEqual({ statement_timeout: "5s" });
      // A session of its own may leave read-only; what follows is then refused by privilege alone.
      expect(await attempt("set default_transaction_read_only = off")).toBe("ran");
      for (const sql of [
        "create table public.pwned (id int)",
        "create temp table pwned (id int)",
        "create schema pwned",
        "create function public.pwn() returns int language sql as 'select 1'",
        "set role postgres",
        "set session authorization postgres",
        `select set_config('strata.log_ref', '${victim}', false)`,
        "select * from platform.projects",
      ])
        expect({ sql, result: await attempt(sql) }).toEqual({ sql, result: expect.stringMatching(/denied/) });
      const creatable = await reader.query(
        `select (select count(*)::int from pg_namespace n where has_schema_privilege(n.oid, 'CREATE')) as schemas,
                has_database_privilege(current_database(), 'CREATE') as db_create,
                has_database_privilege(current_database(), 'TEMP') as db_temp,
                (select count(*)::int from pg_auth_members m where m.member = (select oid from pg_roles where rolname = current_user)) as memberships`,
      );
      expect(creatable.rows[0]).toEqual({ schemas: 0, db_create: false, db_temp: false, memberships: 0 });
    } finally {
      await reader.end();
    }
    // No other database of the cluster lets it in: the main one, a project's, the maintenance one.
    const { rows } = await server.controlSql("select database_name from platform.projects where ref = $1", [
      victim,
    ]);
    for (const name of [new URL(server.dbUrl).pathname.slice(1), rows[0].database_name, "postgres"]) {
      const url = new URL(server.dbUrl);
      url.pathname = `/${name}`;
      await expect(connectTo(url.toString())).rejects.toThrow(/permission denied for database/);
    }
  });
});
