import { execFile, spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { gunzipSync, gzipSync } from "node:zlib";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { withDatabase } from "../../src/db/urls";
import { adminQuery } from "../helpers/db";
import { startTestServer, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { mgmt, waitForStatus } from "../management/client";

/**
 * One migration history (`supabase_migrations.schema_migrations`, the owner's table as on the platform) for the
 * platform's CLI (2.117.0, unchanged, through the database listener), the Management API and branches. Effects
 * are checked as the cluster's superuser on the project's database.
 */

const CLI = path.resolve(__dirname, "../../node_modules/.bin/supabase");
const MCP = path.resolve(__dirname, "../../node_modules/@supabase/mcp-server-supabase/dist/cli.js");

/** Calls one tool of the platform's MCP server (0.13.0, over stdio, JSON-RPC); answers the tool's text. */
async function mcpTool(
  apiUrl: string,
  token: string,
  tool: string,
  args: Record<string, unknown>,
): Promise<string> {
  const child = spawn(process.execPath, [MCP, "--api-url", apiUrl, "--access-token", token], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const answers = new Map<number, (m: any) => void>();
  let buffered = "";
  child.stdout.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8");
    for (let at = buffered.indexOf("\n"); at >= 0; at = buffered.indexOf("\n")) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      const message = line.trim() ? JSON.parse(line) : undefined;
      if (message?.id !== undefined) answers.get(message.id)?.(message);
    }
  });
  let next = 0;
  const request = (method: string, params: unknown) =>
    new Promise<any>((resolve) => {
      const id = ++next;
      answers.set(id, resolve);
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  try {
    await request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "strata-test", version: "1" },
    });
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
    const answer = await request("tools/call", { name: tool, arguments: args });
    if (answer.error || answer.result?.isError) throw new Error(`MCP ${tool}: ${JSON.stringify(answer)}`);
    return answer.result.content.map((c: { text: string }) => c.text).join("");
  } finally {
    child.kill();
  }
}

interface Project {
  ref: string;
  password: string;
  database: string;
}

describe("one migration history for the CLI, the Management API and branches", () => {
  let server: TestServer;
  let port: number;
  let project: Project;
  let workdir: string;
  let profile: string;
  const asAdmin = (sql: string, database = project.database) =>
    adminQuery(sql, [], withDatabase(server.dbUrl, database));
  const dbUrl = (p: Project) => `postgresql://postgres.${p.ref}:${p.password}@127.0.0.1:${port}/postgres`;

  /** Runs the CLI in the test's project directory; answers its output (stdout and stderr). */
  async function cli(...args: string[]): Promise<string> {
    const { stdout, stderr } = await promisify(execFile)(CLI, [...args, "--profile", profile], {
      cwd: workdir,
      env: {
        PATH: process.env.PATH,
        HOME: workdir,
        DO_NOT_TRACK: "1",
        SUPABASE_ACCESS_TOKEN: server.managementToken,
      },
      encoding: "utf8",
      timeout: 120_000,
    });
    return stdout + stderr;
  }

  const apiVersions = async (ref: string) =>
    (
      (await mgmt(server, "GET", `/v1/projects/${ref}/database/migrations`)).body as { version: string }[]
    ).map((m) => m.version);

  async function createProject(name: string, password: string): Promise<Project> {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name, organization_slug: "default-org", db_pass: password, region: "us-east-1" },
    });
    expect(created.status).toBe(201);
    await waitForStatus(server, created.body.ref, "ACTIVE_HEALTHY");
    const { rows } = await server.controlSql("select database_name from platform.projects where ref = $1", [
      created.body.ref,
    ]);
    return { ref: created.body.ref, password, database: rows[0].database_name };
  }

  beforeAll(async () => {
    server = await startTestServer({ STRATA_DB_PORT: "0", MANAGEMENT_RATE_LIMIT: "100000" });
    port = (server.strata.ctx.dbListener as { port: number }).port;
    project = await createProject("migrated", "migrated-password-1");
    workdir = testTempDir("strata-cli-");
    profile = path.join(workdir, "profile.json");
    writeFileSync(
      profile,
      JSON.stringify({
        name: "strata",
        api_url: server.url,
        dashboard_url: server.url,
        project_host: "localhost",
      }),
    );
    await cli("init", "--yes");
  }, 180_000);
  afterAll(async () => {
    const { rows } = await server.controlSql("select ref from platform.projects where not is_default");
    for (const { ref } of rows) await mgmt(server, "DELETE", `/v1/projects/${ref}`);
    await server.stop();
  }, 300_000);

  it("db push and the API's migrations land in one history both read", async () => {
    mkdirSync(path.join(workdir, "supabase/migrations"), { recursive: true });
    writeFileSync(
      path.join(workdir, "supabase/migrations/20250101000000_from_cli.sql"),
      "create table public.from_cli (id int primary key);\n",
    );
    expect(await cli("db", "push", "--db-url", dbUrl(project), "--yes")).toMatch(/Finished supabase db push/);
    expect((await asAdmin("select to_regclass('public.from_cli') is not null as made")).rows[0].made).toBe(
      true,
    );
    // The API lists and reads the CLI's migration, its statements included.
    expect((await mgmt(server, "GET", `/v1/projects/${project.ref}/database/migrations`)).body).toEqual([
      { version: "20250101000000", name: "from_cli" },
    ]);
    const one = await mgmt(server, "GET", `/v1/projects/${project.ref}/database/migrations/20250101000000`);
    expect(one.body).toMatchObject({
      version: "20250101000000",
      name: "from_cli",
      statements: ["create table public.from_cli (id int primary key)"],
    });

    // A migration applied through the API (as MCP apply_migration does): the CLI sees it and fetches it.
    const applied = await mgmt(server, "POST", `/v1/projects/${project.ref}/database/migrations`, {
      body: { name: "from_api", query: "create table public.from_api (id int)" },
    });
    expect(applied.status).toBe(200);
    const versions = await apiVersions(project.ref);
    expect(versions).toHaveLength(2);
    const apiVersion = versions[1];
    const listed = await cli("migration", "list", "--db-url", dbUrl(project));
    expect(listed).toContain(apiVersion);
    expect(listed).toContain("20250101000000");
    await cli("migration", "fetch", "--db-url", dbUrl(project), "--yes");
    const fetched = readdirSync(path.join(workdir, "supabase/migrations")).find((f) =>
      f.startsWith(apiVersion),
    );
    expect(fetched).toBe(`${apiVersion}_from_api.sql`);
    expect(readFileSync(path.join(workdir, "supabase/migrations", fetched!), "utf8")).toContain(
      "create table public.from_api (id int)",
    );

    // The MCP server's tools: list_migrations sees the CLI's; apply_migration's migration reaches the CLI.
    expect(
      await mcpTool(server.url, server.managementToken, "list_migrations", { project_id: project.ref }),
    ).toContain("20250101000000");
    await mcpTool(server.url, server.managementToken, "apply_migration", {
      project_id: project.ref,
      name: "from_mcp",
      query: "create table public.from_mcp (id int)",
    });
    const mcpVersion = (await apiVersions(project.ref)).at(-1)!;
    expect(
      (await mgmt(server, "GET", `/v1/projects/${project.ref}/database/migrations/${mcpVersion}`)).body,
    ).toMatchObject({
      name: "from_mcp",
    });
    expect(await cli("migration", "list", "--db-url", dbUrl(project))).toContain(mcpVersion);
    expect((await asAdmin("select to_regclass('public.from_mcp') is not null as made")).rows[0].made).toBe(
      true,
    );
    // Rolled back through the API: the CLI's history loses it too.
    expect(
      (await mgmt(server, "DELETE", `/v1/projects/${project.ref}/database/migrations?gte=${mcpVersion}`))
        .status,
    ).toBe(200);
    expect(await apiVersions(project.ref)).toEqual(["20250101000000", apiVersion]);

    // migration repair records a version; a version the CLI recorded without statements reads as none.
    writeFileSync(path.join(workdir, "supabase/migrations/20250202000000_repaired.sql"), "select 1;\n");
    await cli(
      "migration",
      "repair",
      "--status",
      "applied",
      "20250202000000",
      "--db-url",
      dbUrl(project),
      "--yes",
    );
    expect(await apiVersions(project.ref)).toEqual(["20250101000000", "20250202000000", apiVersion]);
    const owner = new pg.Client({ connectionString: dbUrl(project) });
    await owner.connect();
    await owner.query(
      "insert into supabase_migrations.schema_migrations (version) values ('20250303000000')",
    );
    await owner.end();
    expect(
      (await mgmt(server, "GET", `/v1/projects/${project.ref}/database/migrations/20250303000000`)).body,
    ).toEqual({ version: "20250303000000", statements: [], rollback: [] });
    await cli(
      "migration",
      "repair",
      "--status",
      "reverted",
      "20250202000000",
      "20250303000000",
      "--db-url",
      dbUrl(project),
      "--yes",
    );
    expect(await apiVersions(project.ref)).toEqual(["20250101000000", apiVersion]);

    // The history is the owner's (as postgres's on the platform), in one table.
    const { rows } = await asAdmin(
      `select c.relowner::regrole::text as owner, n.nspowner::regrole::text as schema_owner
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where c.oid = 'supabase_migrations.schema_migrations'::regclass`,
    );
    expect(rows[0]).toEqual({ owner: `postgres_${project.ref}`, schema_owner: `postgres_${project.ref}` });
    expect(
      (
        await asAdmin("select count(*)::int as n from strata_migrations.schema_migrations").catch(() => ({
          rows: [{ n: 0 }],
        }))
      ).rows[0].n,
    ).toBe(0);
  });

  it("Strata reads and writes the owner's history as the owner, never as the superuser", async () => {
    // The tenant's own code on its history table: a trigger and a forced row-level policy that note who ran them.
    const owner = new pg.Client({ connectionString: dbUrl(project) });
    await owner.connect();
    await owner.query(`
      create table public.history_audit (who text, super boolean, what text);
      grant all on public.history_audit to public;
      create function public.note(what text) returns boolean language plpgsql security invoker as $$
      begin
        insert into public.history_audit
          values (current_user, (select rolsuper from pg_roles where rolname = current_user), what);
        return true;
      end $$;
      create function public.note_trigger() returns trigger language plpgsql as $$
      begin perform public.note(tg_op); return coalesce(new, old); end $$;
      create trigger noted before insert or update or delete on supabase_migrations.schema_migrations
        for each row execute function public.note_trigger();
      alter table supabase_migrations.schema_migrations enable row level security;
      alter table supabase_migrations.schema_migrations force row level security;
      create policy noted on supabase_migrations.schema_migrations using (public.note('read')) with check (true);`);
    await owner.end();

    const base = `/v1/projects/${project.ref}/database/migrations`;
    expect((await mgmt(server, "GET", base)).status).toBe(200);
    expect((await mgmt(server, "GET", `${base}/20250101000000`)).status).toBe(200);
    expect((await mgmt(server, "POST", base, { body: { name: "audited", query: "select 1" } })).status).toBe(
      200,
    );
    expect((await mgmt(server, "PUT", base, { body: { name: "recorded", query: "select 2" } })).status).toBe(
      200,
    );
    const recorded = (await apiVersions(project.ref)).at(-1)!;
    expect((await mgmt(server, "PATCH", `${base}/${recorded}`, { body: { name: "renamed" } })).status).toBe(
      200,
    );
    expect((await mgmt(server, "DELETE", `${base}?gte=${recorded}`)).status).toBe(200);

    const { rows } = await asAdmin(
      "select distinct who, super, what from public.history_audit order by what",
    );
    expect(rows.map((r) => r.what)).toEqual(expect.arrayContaining(["INSERT", "UPDATE", "DELETE", "read"]));
    for (const row of rows) expect(row).toMatchObject({ who: `postgres_${project.ref}`, super: false });

    // The history replaced by a view of the tenant's: read as the owner too.
    await asAdmin("truncate public.history_audit");
    const swap = new pg.Client({ connectionString: dbUrl(project) });
    await swap.connect();
    await swap.query(`
      alter table supabase_migrations.schema_migrations rename to real_history;
      create view supabase_migrations.schema_migrations as
        select * from supabase_migrations.real_history where public.note('view');`);
    expect((await mgmt(server, "GET", base)).status).toBe(200);
    const viewed = await asAdmin("select distinct who, super from public.history_audit where what = 'view'");
    expect(viewed.rows).toEqual([{ who: `postgres_${project.ref}`, super: false }]);
    await swap.query(`
      drop view supabase_migrations.schema_migrations;
      alter table supabase_migrations.real_history rename to schema_migrations;
      drop policy noted on supabase_migrations.schema_migrations;
      alter table supabase_migrations.schema_migrations disable row level security;
      drop trigger noted on supabase_migrations.schema_migrations;`);
    await swap.end();
  });

  it("a branch gets the parent's history, the CLI's migrations with the API's", async () => {
    const parentVersions = await apiVersions(project.ref);
    const created = await mgmt(server, "POST", `/v1/projects/${project.ref}/branches`, {
      body: { branch_name: "feature" },
    });
    expect(created.status).toBe(201);
    const branchRef: string = created.body.project_ref;
    await waitForStatus(server, branchRef, "ACTIVE_HEALTHY");
    for (let i = 0; i < 150 && (await apiVersions(branchRef)).length < parentVersions.length; i++)
      await new Promise((r) => setTimeout(r, 200));
    expect(await apiVersions(branchRef)).toEqual(parentVersions);
    const { rows } = await server.controlSql("select database_name from platform.projects where ref = $1", [
      branchRef,
    ]);
    const made = await asAdmin(
      "select to_regclass('public.from_cli') is not null as cli, to_regclass('public.from_api') is not null as api",
      rows[0].database_name,
    );
    expect(made.rows[0]).toEqual({ cli: true, api: true });
    // The CLI reads the branch's history through the listener with the branch's own password.
    const password = "branch-password-1";
    expect(
      (await mgmt(server, "PATCH", `/v1/projects/${branchRef}/database/password`, { body: { password } }))
        .status,
    ).toBe(200);
    const listed = await cli(
      "migration",
      "list",
      "--db-url",
      dbUrl({ ref: branchRef, password, database: rows[0].database_name }),
    );
    expect(listed).toContain("20250101000000");
  });

  it("moves an earlier strata_migrations history and the owner's own CLI history into one, once", async () => {
    const other = await createProject("upgraded", "upgraded-password-1");
    const superuser = decodeURIComponent(new URL(server.dbUrl).username);
    const sql = (text: string) => asAdmin(text, other.database);
    // The layout before this version: the API's history in strata_migrations (the superuser's), and a history
    // the owner's CLI made in supabase_migrations, one version in both.
    await sql(`
      alter table supabase_migrations.schema_migrations set schema strata_migrations;
      alter table strata_migrations.schema_migrations owner to ${superuser};
      alter table strata_migrations.schema_migrations alter column statements set not null;
      insert into strata_migrations.schema_migrations (version, name, statements, created_by)
        values ('20240101000000', 'api_one', '{select 1}', 'management-api'),
               ('20240202000000', 'api_two', '{select 2}', 'management-api');
      set role postgres_${other.ref};
      create table supabase_migrations.schema_migrations (version text primary key, statements text[], name text);
      insert into supabase_migrations.schema_migrations
        values ('20240202000000', '{select 22}', 'cli_two'), ('20240303000000', '{select 3}', 'cli_three');
      reset role;
      delete from _strata.bootstrap where set_name = 'project' and version = '790';`);
    await server.strata.ctx.registry.evict(other.ref);
    expect(await apiVersions(other.ref)).toEqual(["20240101000000", "20240202000000", "20240303000000"]);
    const two = await mgmt(server, "GET", `/v1/projects/${other.ref}/database/migrations/20240202000000`);
    expect(two.body).toMatchObject({ name: "api_two", statements: ["select 2"] });
    const owned = await sql(
      "select relowner::regrole::text as owner from pg_class where oid = 'supabase_migrations.schema_migrations'::regclass",
    );
    expect(owned.rows[0].owner).toBe(`postgres_${other.ref}`);

    // Run again (a second node, a repeated start): nothing moves twice, nothing is lost.
    await sql("delete from _strata.bootstrap where set_name = 'project' and version = '790'");
    await server.strata.ctx.registry.evict(other.ref);
    expect(await apiVersions(other.ref)).toEqual(["20240101000000", "20240202000000", "20240303000000"]);

    // An owner's view in the history's place is never read by the superuser's move: it is kept, renamed.
    await sql(`
      alter table supabase_migrations.schema_migrations set schema strata_migrations;
      alter table strata_migrations.schema_migrations owner to ${superuser};
      create table public.move_audit (who text);
      grant all on public.move_audit to public;
      set role postgres_${other.ref};
      create function public.seen() returns boolean language sql as
        $$ insert into public.move_audit values (current_user) returning true $$;
      create view supabase_migrations.schema_migrations as
        select '20249999000000'::text as version, null::text[] as statements, 'trap'::text as name where public.seen();
      reset role;
      delete from _strata.bootstrap where set_name = 'project' and version = '790';`);
    await server.strata.ctx.registry.evict(other.ref);
    expect(await apiVersions(other.ref)).toEqual(["20240101000000", "20240202000000", "20240303000000"]);
    expect((await sql("select * from public.move_audit")).rows).toEqual([]);
    const kept = await sql(
      "select relname from pg_class where relnamespace = 'supabase_migrations'::regnamespace and relkind = 'v'",
    );
    expect(kept.rows[0].relname).toMatch(/^schema_migrations_before_\d+$/);
  });

  it("a restore brings the history back, and an earlier version's backup's strata_migrations rows into it", async () => {
    const base = `/v1/projects/${project.ref}/database`;
    const before = await apiVersions(project.ref);
    const started = await mgmt(server, "POST", `${base}/backups`);
    expect(started.status).toBe(201);
    let backup: { status: string; id: number } = started.body;
    while (backup.status === "RUNNING") {
      await new Promise((r) => setTimeout(r, 200));
      const list = await mgmt(server, "GET", `${base}/backups`);
      backup = list.body.backups.find((b: { id: number }) => b.id === started.body.id);
    }
    expect(backup.status).toBe("COMPLETED");
    // The backup as an earlier version wrote it: the API's history among the platform's tables.
    const { rows } = await server.controlSql("select location from platform.database_backups where id = $1", [
      backup.id,
    ]);
    const file = path.join(server.strata.ctx.config.dataDir, "backups", rows[0].location);
    const section = (tag: string, sql: string) => `-- strata:${tag} ${Buffer.byteLength(sql) + 1}\n${sql};\n`;
    const earlier = [
      section("truncate", "truncate table strata_migrations.schema_migrations"),
      section(
        "copy",
        "copy strata_migrations.schema_migrations (version, name, statements, created_by) from stdin",
      ),
      '20200101000000\told_api\t{"select 1"}\tmanagement-api\n',
      '20250101000000\tsame_version\t{"select 2"}\tmanagement-api\n',
      "\\.\n",
    ].join("");
    const dump = gunzipSync(readFileSync(file)).toString("utf8");
    expect(dump.endsWith("-- strata:end 0\n")).toBe(true);
    writeFileSync(file, gzipSync(dump.replace(/-- strata:end 0\n$/, `${earlier}-- strata:end 0\n`)));

    await new Promise((r) => setTimeout(r, 1100));
    const target = Math.floor(Date.now() / 1000);
    await new Promise((r) => setTimeout(r, 1100));
    const restore = await mgmt(server, "POST", `${base}/backups/restore-pitr`, {
      body: { recovery_time_target_unix: target },
    });
    expect(restore.status).toBe(201);
    let outcome: { status: string; backup_id: number; error: string | null };
    do {
      await new Promise((r) => setTimeout(r, 200));
      outcome = (await mgmt(server, "GET", `${base}/backups/restores`)).body.at(-1);
    } while (outcome.status === "RUNNING");
    expect(outcome).toMatchObject({ status: "COMPLETED", backup_id: backup.id, error: null });
    expect(await apiVersions(project.ref)).toEqual(["20200101000000", ...before]);
    expect((await mgmt(server, "GET", `${base}/migrations/20250101000000`)).body).toMatchObject({
      name: "from_cli",
    });
    const owned = await asAdmin(
      "select relowner::regrole::text as owner from pg_class where oid = 'supabase_migrations.schema_migrations'::regclass",
    );
    expect(owned.rows[0].owner).toBe(`postgres_${project.ref}`);
  }, 180_000);
});
