import { chmodSync, existsSync } from "node:fs";
import path from "node:path";
import { createClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { memoryStorage } from "../auth/mailbox";
import { startTestServer, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { controlUrlOf } from "../helpers/db";
import { mgmt } from "../management/client";

const HOOKS = ["before_user_created", "custom_access_token", "password_verification_attempt"] as const;

/**
 * The tenant's hooks, written through the SQL endpoint (so owned by the project's owner) as a hostile tenant
 * would: each records who its session is, then tries to leave the project (run a program, read the server's
 * files, become the superuser or a shared role, change the shared roles' settings, change the auth tables
 * Strata's own statements use), recording what ran and what was refused. The custom access token hook also
 * does what it is for: a claim in the token. Grants as the platform's hook docs say.
 */
function tenantSql(ref: string, superuser: string, programDir: string): string {
  const lit = (s: string) => `'${s.replace(/'/g, "''")}'`;
  // Each attempt: its name and a SQL expression of the statement to try (`hook` is the hook's name).
  const attempts: [string, string][] = [
    ["whoami", lit("select 1")],
    ["reset role", lit("reset role")],
    ["whoami after reset role", lit("select 1")],
    ["program", `format('copy (select 1) to program %L', ${lit(`touch ${programDir}/`)} || hook)`],
    ["read server file", lit("select pg_read_file('postgresql.conf')")],
    ["set role superuser", lit(`set role ${superuser}`)],
    ["set role owner", lit(`set role postgres_${ref}`)],
    ["alter authenticator", lit("alter role authenticator set statement_timeout = '1ms'")],
    ["alter supabase_auth_admin", lit("alter role supabase_auth_admin set statement_timeout = '1ms'")],
    ["grant a power", lit(`grant pg_execute_server_program to strata_auth_${ref}`)],
    // On a table the sign-up calling the before-user-created hook does not lock (it waits for the lock first).
    [
      "trigger on auth table",
      lit("create trigger t after insert on auth.mfa_factors execute function public.audit()"),
    ],
    [
      "default on auth.users",
      lit("alter table auth.users alter column aud set default public.bad_default()"),
    ],
    ["function in auth", lit("create function auth.evil() returns int language sql as 'select 1'")],
    // Ran: it only changes this session, and Strata resets it after the hook (the shadowing now() below).
    ["search_path", lit("select set_config('search_path', 'public, pg_catalog', false)")],
    // Last: on PostgreSQL before 16 a member may still become its role.
    ["set role supabase_auth_admin", lit("set role supabase_auth_admin")],
  ];
  const calls = attempts.map(([name, statement]) => `perform public.try(hook, ${lit(name)}, ${statement});`);
  return `
    create table public.hook_audit (id bigserial primary key, hook text not null, attempt text not null,
      outcome text not null, current_role_name text, session_role_name text, session_superuser boolean);
    grant usage on schema public to supabase_auth_admin;
    grant select, insert on public.hook_audit to supabase_auth_admin;
    grant usage on sequence public.hook_audit_id_seq to supabase_auth_admin;

    create function public.try(hook text, attempt text, statement text) returns void language plpgsql as $$
    declare outcome text := 'ran';
    begin
      begin
        -- A statement waiting for a lock the calling request holds fails instead of timing the hook out.
        perform set_config('lock_timeout', '500ms', true);
        execute statement;
      exception when others then
        outcome := 'refused: ' || sqlerrm;
      end;
      insert into public.hook_audit (hook, attempt, outcome, current_role_name, session_role_name, session_superuser)
      values (hook, attempt, outcome, current_user, session_user,
              (select rolsuper from pg_roles where rolname = session_user));
    end $$;

    create function public.attack(hook text) returns void language plpgsql as $$
    begin
      ${calls.join("\n      ")}
    end $$;

    create function public.audit() returns trigger language plpgsql as $$
    begin
      perform public.attack('cascade');
      return null;
    end $$;
    create function public.bad_default() returns text language sql as $$ select 'x' $$;

    -- Found instead of pg_catalog.now() by any statement of a session whose search_path a hook left at public.
    create function public.now() returns timestamptz language plpgsql as $$
    begin
      perform public.try('shadow', 'now', 'select 1');
      return pg_catalog.now();
    end $$;

    create function public.custom_access_token_hook(event jsonb) returns jsonb language plpgsql as $$
    begin
      perform public.attack('custom_access_token');
      return jsonb_build_object('claims', event->'claims' || '{"tenant_claim": "granted"}');
    end $$;
    create function public.before_user_created_hook(event jsonb) returns jsonb language plpgsql as $$
    begin
      perform public.attack('before_user_created');
      return '{}';
    end $$;
    create function public.password_verification_attempt_hook(event jsonb) returns jsonb language plpgsql as $$
    begin
      perform public.attack('password_verification_attempt');
      return '{"decision": "continue"}';
    end $$;
    grant execute on function public.custom_access_token_hook, public.before_user_created_hook,
      public.password_verification_attempt_hook to supabase_auth_admin;
    revoke execute on function public.custom_access_token_hook, public.before_user_created_hook,
      public.password_verification_attempt_hook from authenticated, anon, public;

    -- A table of the tenant's that a user's deletion cascades to, with a trigger.
    create table public.profiles (id uuid primary key references auth.users on delete cascade);
    create trigger profiles_deleted after delete on public.profiles for each row execute function public.audit();
  `;
}

describe("The auth service runs the tenant's code as the project's auth role, not the superuser", () => {
  let server: TestServer;
  let authRole: string;
  let programDir: string;
  let pg16: boolean;
  let sharedSettingsBefore: unknown[];
  const sql = (query: string) =>
    mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, { body: { query } });
  const client = () =>
    createClient(server.url, server.anonKey, {
      auth: { persistSession: false, autoRefreshToken: false, storage: memoryStorage() },
    });
  /** The settings of every role shared by the cluster's projects, as the superuser sees them. */
  const sharedSettings = async () =>
    (
      await server.sql(
        `select r.rolname, s.setdatabase, s.setconfig from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
          where (r.rolname in ('authenticator', 'supabase_auth_admin', 'anon', 'authenticated', 'service_role')
                 or r.rolsuper)
            and s.setdatabase in (0, (select oid from pg_database where datname = current_database()))
          order by 1, 2`,
      )
    ).rows;
  const audit = async (hook: string) =>
    (
      await server.sql(
        `select attempt, outcome, current_role_name, session_role_name, session_superuser
           from public.hook_audit where hook = $1 order by id`,
        [hook],
      )
    ).rows;

  beforeAll(async () => {
    server = await startTestServer();
    authRole = `strata_auth_${server.ref}`;
    const superuser = (await server.sql("select current_user as u")).rows[0].u as string;
    pg16 = Number((await server.sql("show server_version_num")).rows[0].server_version_num) >= 160000;
    // Writable by the OS user PostgreSQL runs as: a program it ran would leave its file here.
    programDir = testTempDir("strata-authrole-");
    chmodSync(programDir, 0o777);
    // The channel works: a program the superuser runs leaves its file there.
    await server.sql(`copy (select 1) to program 'touch ${programDir}/superuser'`);
    expect(existsSync(path.join(programDir, "superuser"))).toBe(true);
    sharedSettingsBefore = await sharedSettings();
    const written = await sql(tenantSql(server.ref, superuser, programDir));
    expect(written.status).toBe(201);
    const hook = (name: string) => ({
      [`hook_${name}_enabled`]: true,
      [`hook_${name}_uri`]: `pg-functions://postgres/public/${name}_hook`,
    });
    const patched = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/config/auth`, {
      body: Object.assign({}, ...HOOKS.map(hook)),
    });
    expect(patched.status).toBe(200);
  });
  afterAll(() => server.stop());

  it("runs every hook as the auth role, which cannot run a program, read files or change shared roles", async () => {
    const signedUp = await client().auth.signUp({ email: "ivy@example.test", password: "Ivy-pass-1234" });
    expect(signedUp.error).toBeNull();
    const signedIn = await client().auth.signInWithPassword({
      email: "ivy@example.test",
      password: "Ivy-pass-1234",
    });
    expect(signedIn.error).toBeNull();
    // More requests on the pool's connections: none of them resolves now() in public afterwards.
    for (let i = 0; i < 3; i++) {
      const again = await client().auth.signInWithPassword({
        email: "ivy@example.test",
        password: "Ivy-pass-1234",
      });
      expect(again.error).toBeNull();
    }

    // The legitimate effect: the hook's claim is in the tokens of the sign-up and the sign-in.
    expect(decodeJwt(signedUp.data.session!.access_token)).toMatchObject({ tenant_claim: "granted" });
    expect(decodeJwt(signedIn.data.session!.access_token)).toMatchObject({ tenant_claim: "granted" });

    for (const hook of HOOKS) {
      const rows = await audit(hook);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        // Who the session is, whatever the function tried: the auth role, logged in as itself.
        expect({ hook, ...row }).toMatchObject({
          current_role_name: authRole,
          session_role_name: authRole,
          session_superuser: false,
        });
        const harmless = ["whoami", "reset role", "whoami after reset role", "search_path"];
        if (harmless.includes(row.attempt)) expect({ hook, ...row }).toMatchObject({ outcome: "ran" });
        else if (row.attempt !== "set role supabase_auth_admin" || pg16) {
          expect({ hook, attempt: row.attempt, outcome: row.outcome }).toMatchObject({
            outcome: expect.stringMatching(/^refused: (permission denied|must be owner)/),
          });
        }
      }
      expect(existsSync(path.join(programDir, hook))).toBe(false);
    }
    expect(await audit("shadow")).toEqual([]);
    expect(await sharedSettings()).toEqual(sharedSettingsBefore);
    // The auth tables are as Strata made them: no trigger, default or function of the tenant's.
    const { rows: auth } = await server.sql(
      `select (select count(*)::int from pg_trigger where tgrelid = 'auth.mfa_factors'::regclass and not tgisinternal) as triggers,
              (select pg_get_expr(adbin, adrelid) from pg_attrdef
                where adrelid = 'auth.users'::regclass
                  and adnum = (select attnum from pg_attribute where attrelid = 'auth.users'::regclass and attname = 'aud')) as aud,
              to_regproc('auth.evil') is null as no_function`,
    );
    expect(auth[0]).toEqual({ triggers: 0, aud: "'authenticated'::text", no_function: true });
  });

  it("runs what a user's deletion cascades to in the tenant's tables without the superuser", async () => {
    const created = await client().auth.signUp({ email: "noa@example.test", password: "Noa-pass-1234" });
    const id = created.data.user!.id;
    expect((await sql(`insert into public.profiles values ('${id}')`)).status).toBe(201);
    const admin = createClient(server.url, server.serviceKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    expect((await admin.auth.admin.deleteUser(id)).error).toBeNull();
    expect((await server.sql("select count(*)::int as n from public.profiles")).rows[0].n).toBe(0);

    const rows = await audit("cascade");
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      // The tenant's trigger fires as the statement's user: before, the superuser.
      expect(row).toMatchObject({
        current_role_name: authRole,
        session_role_name: authRole,
        session_superuser: false,
      });
    }
    expect(rows.find((r) => r.attempt === "program")!.outcome).toMatch(/^refused: permission denied/);
    expect(existsSync(path.join(programDir, "cascade"))).toBe(false);
    expect(await sharedSettings()).toEqual(sharedSettingsBefore);
  });

  it("gives the auth role no power beyond its project's auth schema, and the tenant no way into it", async () => {
    const { rows: role } = await server.sql(
      `select rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls, rolcanlogin, rolinherit
         from pg_roles where rolname = $1`,
      [authRole],
    );
    expect(role).toEqual([
      {
        rolsuper: false,
        rolcreaterole: false,
        rolcreatedb: false,
        rolreplication: false,
        rolbypassrls: false,
        rolcanlogin: true,
        rolinherit: true,
      },
    ]);
    // A member of supabase_auth_admin only (that may not become it), and nobody is a member of it.
    const { rows: memberOf } = await server.sql(
      `select r.rolname, ${pg16 ? "m.set_option" : "null as set_option"}
         from pg_auth_members m join pg_roles r on r.oid = m.roleid join pg_roles u on u.oid = m.member
        where u.rolname = $1`,
      [authRole],
    );
    expect(memberOf).toEqual([{ rolname: "supabase_auth_admin", set_option: pg16 ? false : null }]);
    const { rows: members } = await server.sql(
      `select count(*)::int as n from pg_auth_members m join pg_roles r on r.oid = m.roleid where r.rolname = $1`,
      [authRole],
    );
    expect(members[0].n).toBe(0);
    // Its own database only: not the control plane's, not the maintenance database.
    const control = new URL(controlUrlOf(server.dbUrl)).pathname.slice(1);
    const own = new URL(server.dbUrl).pathname.slice(1);
    const { rows: connect } = await server.sql(
      `select has_database_privilege($1, $2, 'connect') as own, has_database_privilege($1, $3, 'connect') as control,
              has_database_privilege($1, 'postgres', 'connect') as maintenance`,
      [authRole, own, control],
    );
    expect(connect[0]).toEqual({ own: true, control: false, maintenance: false });

    // The tenant's own SQL cannot become the auth role, take its login or change it.
    for (const attack of [
      `set role ${authRole}`,
      `grant ${authRole} to postgres_${server.ref}`,
      `alter role ${authRole} password 'known'`,
      `alter role ${authRole} set search_path = public`,
      "grant supabase_auth_admin to current_user",
    ]) {
      const res = await sql(attack);
      expect({ attack, status: res.status }).toEqual({ attack, status: 400 });
    }
    const { rows: still } = await server.sql(
      `select count(*)::int as n from pg_auth_members m join pg_roles r on r.oid = m.roleid
         join pg_roles u on u.oid = m.member
        where r.rolname in ($1, 'supabase_auth_admin') and u.rolname in ($2, $3)`,
      [authRole, `postgres_${server.ref}`, `strata_sql_${server.ref}`],
    );
    expect(still[0].n).toBe(0);
  });
});
