import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { platformCli, type Cli } from "./clients";

/**
 * The platform's CLI (npm `supabase`, pinned) run unchanged against Strata with a profile file: every command
 * that needs no internet, its effect shown through SQL or another API.
 */

jest.setTimeout(600_000);

const OWNER_PASSWORD = "Owner-pass-of-the-tests-1";

describe("the platform's CLI against Strata", () => {
  let server: TestServer;
  let cli: Cli;
  let ref: string;
  /** The project's owner login (`postgres_<ref>`), as `--db-url` takes it. */
  let ownerUrl: string;
  const asOwner = async (sql: string) => {
    const client = new pg.Client({ connectionString: ownerUrl });
    await client.connect();
    try {
      return await client.query(sql);
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    server = await startTestServer();
    ref = server.ref;
    cli = await platformCli(server);
    await mgmt(server, "PATCH", `/v1/projects/${ref}/database/password`, {
      body: { password: OWNER_PASSWORD },
    });
    const url = new URL(server.dbUrl);
    url.username = `postgres_${ref}`;
    url.password = OWNER_PASSWORD;
    ownerUrl = url.toString();
    await asOwner(`create table public.items (
      id bigint generated always as identity primary key,
      name text not null,
      total numeric generated always as (1) stored)`);
  });
  afterAll(() => server.stop());

  it("lists organizations whose id every route takes, and creates a project in one (--org-id)", async () => {
    const orgs = JSON.parse(await cli.ok(["orgs", "list", "-o", "json"]));
    expect(orgs).toEqual([expect.objectContaining({ name: "Default Organization" })]);
    const orgId = orgs[0].id;
    expect(orgId).toBe(orgs[0].slug);
    const created = JSON.parse(
      await cli.ok([
        "projects",
        "create",
        "made-by-cli",
        "--org-id",
        orgId,
        "--db-password",
        OWNER_PASSWORD,
        "--region",
        "us-east-1",
        "-o",
        "json",
      ]),
    );
    expect(created).toMatchObject({ name: "made-by-cli", organization_id: orgId });
    const { rows } = await server.controlSql(
      `select o.slug from platform.projects p join platform.organizations o on o.id = p.organization_id
        where p.ref = $1`,
      [created.ref],
    );
    expect(rows).toEqual([{ slug: orgId }]);
    const listed = JSON.parse(await cli.ok(["projects", "list", "-o", "json"]));
    expect(listed.map((p: { ref: string }) => p.ref)).toEqual(expect.arrayContaining([ref, created.ref]));
    expect((await mgmt(server, "GET", `/v1/organizations/${orgId}`)).body.id).toBe(orgId);
  });

  it("creates an organization and deletes a project (orgs create, projects delete)", async () => {
    // It prints `Created organization: <id>` before the JSON.
    const created = await cli.ok(["orgs", "create", "Made By CLI", "-o", "json"]);
    const org = JSON.parse(created.slice(created.indexOf("{")));
    expect(org).toMatchObject({ id: "made-by-cli", name: "Made By CLI" });
    const orgs = await server.controlSql("select name from platform.organizations where slug = $1", [org.id]);
    expect(orgs.rows).toEqual([{ name: "Made By CLI" }]);
    const made = JSON.parse(
      await cli.ok([
        "projects",
        "create",
        "to-delete",
        "--org-id",
        org.id,
        "--db-password",
        OWNER_PASSWORD,
        "--region",
        "us-east-1",
        "-o",
        "json",
      ]),
    );
    expect(await cli.ok(["projects", "delete", made.ref, "--yes"])).toMatch(/Deleted project: to-delete/);
    expect((await mgmt(server, "GET", `/v1/projects/${made.ref}`)).status).toBe(404);
    const database = async () =>
      (await server.sql("select datname from pg_database where datname like $1", [`%${made.ref}%`])).rows;
    for (let i = 0; i < 300 && (await database()).length > 0; i++)
      await new Promise((r) => setTimeout(r, 200));
    expect(await database()).toEqual([]);
    const listed = JSON.parse(await cli.ok(["projects", "list", "-o", "json"]));
    expect(listed.map((p: { ref: string }) => p.ref)).not.toContain(made.ref);
  });

  it("reads the project's API keys, the secret one in full only with --reveal", async () => {
    const masked = JSON.parse(await cli.ok(["projects", "api-keys", "--project-ref", ref, "-o", "json"]));
    expect(JSON.stringify(masked)).not.toContain(server.serviceKey);
    const keys = JSON.parse(
      await cli.ok(["projects", "api-keys", "--reveal", "--project-ref", ref, "-o", "json"]),
    );
    expect(keys).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "anon", api_key: server.anonKey }),
        expect.objectContaining({ name: "service_role", api_key: server.serviceKey }),
      ]),
    );
  });

  /** The project database's own settings (`ALTER DATABASE ... SET`). */
  const databaseSettings = async (): Promise<string[]> =>
    (
      await server.sql(
        `select unnest(setconfig) as setting from pg_db_role_setting
          where setdatabase = (select oid from pg_database where datname = current_database()) and setrole = 0`,
      )
    ).rows.map((r) => r.setting);
  /** A setting as a new session of the project's database starts with it. */
  const show = async (name: string): Promise<string> => (await asOwner(`show ${name}`)).rows[0][name];

  it("updates postgres config by sending back what it read, restart-only fields unchanged", async () => {
    const config = (command: string, ...args: string[]) =>
      cli.run(["postgres-config", command, "--experimental", "--project-ref", ref, ...args]);
    const read = async () => JSON.parse((await config("get", "-o", "json")).stdout);
    const before = await read();
    expect(before.max_connections).toEqual(expect.any(Number));
    expect((await config("update", "--config", "statement_timeout=30s")).code).toBe(0);
    expect(await databaseSettings()).toContain("statement_timeout=30s");
    // A restart-only field really changed is still refused, and nothing of the request is applied.
    const refused = await config(
      "update",
      "--config",
      "statement_timeout=5s",
      "--config",
      `max_connections=${before.max_connections + 1}`,
    );
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/max_connections/);
    expect(await read()).toMatchObject({ statement_timeout: "30s", max_connections: before.max_connections });
    // `delete` sends back the config it read without the key: the override goes, the others stay.
    expect((await config("update", "--config", "work_mem=24MB")).code).toBe(0);
    expect((await config("delete", "--config", "statement_timeout")).code).toBe(0);
    expect(await databaseSettings()).toEqual(["work_mem=24MB"]);
    expect(await show("statement_timeout")).toBe(before.statement_timeout);
    // `update --replace-existing-overrides` sends only its own keys: every other override goes.
    expect((await config("update", "--replace-existing-overrides", "--config", "lock_timeout=9s")).code).toBe(
      0,
    );
    expect(await databaseSettings()).toEqual(["lock_timeout=9s"]);
    expect(await show("work_mem")).toBe(before.work_mem);
  });

  it("pushes config.toml (config push) and finds the remote up to date after", async () => {
    const file = path.join(cli.dir, "supabase", "config.toml");
    const toml = readFileSync(file, "utf8")
      .replace(/^site_url = .*$/m, 'site_url = "https://app.example.com"')
      .replace(/^max_rows = .*$/m, "max_rows = 250");
    writeFileSync(file, toml);
    await cli.ok(["config", "push", "--project-ref", ref, "--yes"]);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/config/auth`)).body.site_url).toBe(
      "https://app.example.com",
    );
    const rest = (await mgmt(server, "GET", `/v1/projects/${ref}/postgrest`)).body;
    expect(rest).toMatchObject({ max_rows: 250, db_schema: "public,graphql_public" });
    const again = await cli.ok(["config", "push", "--project-ref", ref, "--yes"]);
    expect(again).not.toMatch(/\[update\]/);
  });

  it("pulls the remote config into config.toml (config pull) and finds no difference after (config diff)", async () => {
    const elsewhere = await platformCli(server);
    await mgmt(server, "PATCH", `/v1/projects/${ref}/config/auth`, { body: { jwt_exp: 1800 } });
    await elsewhere.ok(["config", "pull", "--project-ref", ref, "--yes"]);
    const toml = readFileSync(path.join(elsewhere.dir, "supabase", "config.toml"), "utf8");
    expect(toml).toMatch(/^jwt_expiry = 1800$/m);
    const diff = await elsewhere.ok(["config", "diff", "--project-ref", ref]);
    expect(diff).not.toMatch(/jwt_expiry|site_url|max_rows/);
  });

  it("creates, reads, renames and deletes a preview branch", async () => {
    await cli.ok([
      "branches",
      "create",
      "feature-x",
      "--persistent",
      "--git-branch",
      "feat/x",
      "--project-ref",
      ref,
    ]);
    const listed = JSON.parse(await cli.ok(["branches", "list", "--project-ref", ref, "-o", "json"]));
    const branch = listed.find((b: { name: string }) => b.name === "feature-x");
    expect(branch).toBeDefined();
    const { rows } = await server.controlSql("select ref from platform.projects where ref = $1", [
      branch.project_ref,
    ]);
    expect(rows).toHaveLength(1);
    const env = JSON.parse(
      await cli.ok(["branches", "get", "feature-x", "--project-ref", ref, "-o", "json"]),
    );
    expect(env).toMatchObject({ SUPABASE_ANON_KEY: expect.any(String), POSTGRES_URL: expect.any(String) });
    const stored = async () =>
      (
        await server.controlSql(
          "select name, git_branch, persistent, status from platform.branches where id = $1",
          [branch.id],
        )
      ).rows[0];
    expect(await stored()).toMatchObject({ git_branch: "feat/x", persistent: true });
    await cli.ok([
      "branches",
      "update",
      "feature-x",
      "--name",
      "feature-y",
      "--git-branch",
      "feat/y",
      "--persistent=false",
      "--status",
      "MIGRATIONS_PASSED",
      "--project-ref",
      ref,
    ]);
    expect(await stored()).toEqual({
      name: "feature-y",
      git_branch: "feat/y",
      persistent: false,
      status: "MIGRATIONS_PASSED",
    });
    const status = async () =>
      (await server.controlSql("select status from platform.projects where ref = $1", [branch.project_ref]))
        .rows[0].status;
    await cli.ok(["branches", "pause", "feature-y", "--project-ref", ref]);
    expect(await status()).toMatch(/INACTIVE|PAUSING/);
    await cli.ok(["branches", "unpause", "feature-y", "--project-ref", ref]);
    expect(await status()).not.toMatch(/INACTIVE|PAUSING/);
    await cli.ok(["branches", "delete", "feature-y", "--project-ref", ref, "--yes"]);
    const after = JSON.parse(await cli.ok(["branches", "list", "--project-ref", ref, "-o", "json"]));
    expect(after.map((b: { name: string }) => b.name)).not.toContain("feature-y");
  });

  it("reads and changes the project's other settings", async () => {
    const run = (...command: string[]) => cli.ok([...command, "--project-ref", ref, "--experimental"]);
    for (const command of [
      ["snippets", "list"],
      ["backups", "list"],
      ["sso", "list"],
      ["sso", "info"],
      ["domains", "get"],
      ["encryption", "get-root-key"],
      ["network-restrictions", "get"],
      ["ssl-enforcement", "get"],
      ["network-bans", "get"],
      ["vanity-subdomains", "get"],
    ]) {
      await run(...command);
    }
    // The test cluster is a DATABASE_URL one: settings of pg_hba.conf are kept, not applied (README).
    expect(await run("ssl-enforcement", "update", "--enable-db-ssl-enforcement")).toMatch(/SSL is/);
    expect(await run("ssl-enforcement", "update", "--disable-db-ssl-enforcement")).toMatch(/NOT/);
    await run(
      "network-restrictions",
      "update",
      "--db-allow-cidr",
      "203.0.113.0/24",
      "--db-allow-cidr",
      "::/0",
    );
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/network-restrictions`)).body.config).toMatchObject(
      {
        dbAllowedCidrs: ["203.0.113.0/24"],
      },
    );
    await run("network-restrictions", "update", "--db-allow-cidr", "0.0.0.0/0", "--db-allow-cidr", "::/0");
    expect(await run("network-bans", "remove", "--db-unban-ip", "203.0.113.9")).toMatch(/removed/);
    expect(await run("vanity-subdomains", "check-availability", "--desired-subdomain", "my-app")).toMatch(
      /available: true/,
    );
    expect(await run("vanity-subdomains", "activate", "--desired-subdomain", "my-app")).toMatch(/my-app/);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/vanity-subdomain`)).body).toMatchObject({
      status: "active",
      custom_domain: expect.stringContaining("my-app"),
    });
    await run("vanity-subdomains", "delete");
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/vanity-subdomain`)).body.status).toBe("not-used");
    // Without a custom hostname, as the platform answers.
    expect((await cli.run(["domains", "reverify", "--project-ref", ref])).stderr).toMatch(
      /no custom hostname/,
    );
    await run("domains", "delete");
  });

  it("sets, lists and unsets secrets", async () => {
    await cli.ok(["secrets", "set", "STRIPE_KEY=sk_test_1", "OTHER=2", "--project-ref", ref]);
    const listed = JSON.parse(await cli.ok(["secrets", "list", "--project-ref", ref, "-o", "json"]));
    expect(listed.map((s: { name: string }) => s.name).sort()).toEqual(["OTHER", "STRIPE_KEY"]);
    const stored = await server.controlSql(
      "select name from platform.project_secrets where project_ref = $1 order by name",
      [ref],
    );
    expect(stored.rows).toEqual([{ name: "OTHER" }, { name: "STRIPE_KEY" }]);
    await cli.ok(["secrets", "unset", "OTHER", "--project-ref", ref, "--yes"]);
    const left = await server.controlSql("select name from platform.project_secrets where project_ref = $1", [
      ref,
    ]);
    expect(left.rows).toEqual([{ name: "STRIPE_KEY" }]);
    const envFile = path.join(cli.dir, "secrets.env");
    writeFileSync(envFile, 'FROM_FILE=a=b\nQUOTED="two words"\n');
    await cli.ok(["secrets", "set", "--env-file", envFile, "--project-ref", ref]);
    const digests = JSON.parse(await cli.ok(["secrets", "list", "--project-ref", ref, "-o", "json"]));
    expect(digests.map((s: { name: string }) => s.name).sort()).toEqual([
      "FROM_FILE",
      "QUOTED",
      "STRIPE_KEY",
    ]);
    // A new root key (read on stdin) re-encrypts every secret: each still decrypts to the value it had.
    const rootKey = "a-new-root-key-of-at-least-32-characters";
    await cli.ok(["encryption", "update-root-key", "--project-ref", ref], { input: `${rootKey}\n` });
    expect(await cli.ok(["encryption", "get-root-key", "--project-ref", ref])).toContain(rootKey);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/pgsodium`)).body).toEqual({ root_key: rootKey });
    expect(JSON.parse(await cli.ok(["secrets", "list", "--project-ref", ref, "-o", "json"]))).toEqual(
      digests,
    );
  });

  it("deploys (--use-api), lists, downloads (--use-api) and deletes a function of several files", async () => {
    const source = path.join(cli.dir, "supabase", "functions", "hello");
    mkdirSync(source, { recursive: true });
    const files = {
      "index.ts": 'import { greet } from "./greet.ts";\nDeno.serve(() => new Response(greet("cli")));\n',
      "greet.ts": "export const greet = (who: string) => `hello ${who}`;\n",
    };
    for (const [name, content] of Object.entries(files)) writeFileSync(path.join(source, name), content);
    await cli.ok(["functions", "deploy", "hello", "--use-api", "--no-verify-jwt", "--project-ref", ref]);
    expect(await (await fetch(`${server.url}/functions/v1/hello`)).text()).toBe("hello cli");

    const listed = JSON.parse(await cli.ok(["functions", "list", "--project-ref", ref, "-o", "json"]));
    expect(listed).toEqual([
      expect.objectContaining({
        slug: "hello",
        entrypoint_path: expect.stringMatching(/^file:\/\/.*\/index\.ts$/),
      }),
    ]);

    const elsewhere = await platformCli(server);
    await elsewhere.ok(["functions", "download", "hello", "--use-api", "--project-ref", ref]);
    for (const [name, content] of Object.entries(files)) {
      expect(readFileSync(path.join(elsewhere.dir, "supabase", "functions", "hello", name), "utf8")).toBe(
        content,
      );
    }

    await cli.ok(["functions", "delete", "hello", "--project-ref", ref]);
    expect((await fetch(`${server.url}/functions/v1/hello`)).status).toBe(404);
    expect(JSON.parse(await cli.ok(["functions", "list", "--project-ref", ref, "-o", "json"]))).toEqual([]);
  });

  it("runs SQL (db query) and writes the migration history into files (migration fetch)", async () => {
    const query = (sql: string) => cli.ok(["db", "query", sql, "--db-url", ownerUrl, "-o", "json"]);
    await query("create table public.queried (id int primary key)");
    expect((await server.sql("select to_regclass('public.queried') as t")).rows[0].t).toBe("queried");
    expect(JSON.parse(await query("select 41 + 1 as answer"))).toEqual([{ answer: 42 }]);
    const applied = await mgmt(server, "POST", `/v1/projects/${ref}/database/migrations`, {
      body: { name: "from_api", query: "create table public.fetched (id int)" },
    });
    expect(applied.status).toBeLessThan(300);
    const elsewhere = await platformCli(server);
    await elsewhere.ok(["migration", "fetch", "--db-url", ownerUrl, "--yes"]);
    const migrations = path.join(elsewhere.dir, "supabase", "migrations");
    const file = readdirSync(migrations).find((name) => name.endsWith("_from_api.sql"));
    expect(readFileSync(path.join(migrations, file!), "utf8")).toContain("create table public.fetched");
  });

  it("generates TypeScript types as postgres-meta does", async () => {
    const types = await cli.ok(["gen", "types", "--project-id", ref]);
    expect(types).toContain("export type Database = {");
    const items = types.slice(types.indexOf("items: {"));
    const section = (name: string) =>
      items.slice(items.indexOf(`${name}: {`), items.indexOf("}", items.indexOf(`${name}: {`)));
    expect(section("Row")).toMatch(/id: number\s+name: string\s+total: number \| null/);
    expect(section("Insert")).toMatch(/id\?: never\s+name: string\s+total\?: never/);
    expect(section("Update")).toMatch(/id\?: never\s+name\?: string\s+total\?: never/);
    expect(types).not.toMatch(/_strata/);
  });

  it("inspects the database (every inspect db command) and lists none of Strata's own tables", async () => {
    // The slowest and most called statement of the owner's (outliers lists the top ten by total time, calls by
    // number of calls, and Strata's own work on the owner's login is counted there too): pg_stat_statements
    // counts the runs of one statement with other constants as one entry.
    await asOwner("select count(*) from public.items, pg_sleep(0.3) where name = 'inspect-me'");
    await asOwner(
      Array(24).fill("select count(*) from public.items, pg_sleep(0) where name = 'inspect-me'").join(";"),
    );
    const inspect = (command: string) => cli.ok(["inspect", "db", command, "--db-url", ownerUrl]);
    expect(await inspect("outliers")).toMatch(/inspect-me|public\.items/);
    expect(await inspect("calls")).toMatch(/public\.items/);
    // Strata's tables live in `extensions`, which these commands skip as the platform's (sql/project/791).
    // (table-sizes, seq-scans, index-usage, unused-indexes, role-configs, ... are deprecated names of these.)
    for (const command of ["table-stats", "vacuum-stats"]) {
      const out = await inspect(command);
      expect(out).toMatch(/public\.items/);
      expect(out).not.toMatch(/_strata|strata_|pg_stat_statements_row/);
    }
    const indexes = await inspect("index-stats");
    expect(indexes).toMatch(/items_pkey/);
    expect(indexes).not.toMatch(/_strata|strata_/);
    expect(await inspect("bloat")).not.toMatch(/_strata|strata_/);
    for (const command of [
      "locks",
      "blocking",
      "long-running-queries",
      "role-stats",
      "replication-slots",
      "traffic-profile",
    ]) {
      await inspect(command);
    }
    // The whole cluster's WAL (pg_ls_waldir) is not a project's to read (README).
    const walStats = await cli.run(["inspect", "db", "db-stats", "--db-url", ownerUrl]);
    expect(walStats.stderr).toMatch(/permission denied for function pg_ls_waldir/);
  });

  it("reports the user's security advisories and none of Strata's own objects (db advisors)", async () => {
    // The CLI lints with its own SQL here (splinter): Strata's functions have pinned search paths, so none is
    // reported as the user's.
    const lints = JSON.parse(
      await cli.ok(["db", "advisors", "--db-url", ownerUrl, "--type", "security", "--level", "info"]),
    );
    expect(lints).toContainEqual(
      expect.objectContaining({
        name: "rls_disabled_in_public",
        cache_key: "rls_disabled_in_public_public_items",
      }),
    );
    expect(JSON.stringify(lints)).not.toMatch(/_strata|strata_/);
    const api = await mgmt(server, "GET", `/v1/projects/${ref}/advisors/security`);
    expect(JSON.stringify(api.body)).not.toMatch(/_strata|strata_/);
    // Its performance lints (unused and duplicate indexes, tables without a primary key, ...) likewise.
    await asOwner(
      "create table public.no_key (label text); create index no_key_label on public.no_key (label)",
    );
    const performance = await cli.ok([
      "db",
      "advisors",
      "--db-url",
      ownerUrl,
      "--type",
      "performance",
      "--level",
      "info",
    ]);
    expect(JSON.parse(performance)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ cache_key: "no_primary_key_public_no_key" }),
        expect.objectContaining({ cache_key: "unused_index_public_no_key_no_key_label" }),
      ]),
    );
    expect(performance).not.toMatch(/_strata|strata_/);
  });
  it("restores the project to a time after its latest backup (backups restore)", async () => {
    await asOwner("create table public.before_backup (id int)");
    const base = `/v1/projects/${ref}/database/backups`;
    const started = await mgmt(server, "POST", base);
    expect(started.status).toBe(201);
    const status = async () =>
      (await mgmt(server, "GET", base)).body.backups.find((b: { id: number }) => b.id === started.body.id)
        .status;
    for (let i = 0; i < 300 && (await status()) === "RUNNING"; i++)
      await new Promise((r) => setTimeout(r, 200));
    expect(await status()).toBe("COMPLETED");
    expect(
      JSON.parse(await cli.ok(["backups", "list", "--project-ref", ref, "-o", "json"])).backups,
    ).toContainEqual(expect.objectContaining({ id: started.body.id, status: "COMPLETED" }));
    // The target is a whole second after the backup; a table made after it is gone once restored.
    await new Promise((r) => setTimeout(r, 1100));
    const target = Math.floor(Date.now() / 1000);
    await asOwner("create table public.after_backup (id int)");
    await cli.ok(["backups", "restore", "--timestamp", String(target), "--project-ref", ref]);
    const restore = async () => (await mgmt(server, "GET", `${base}/restores`)).body.at(-1);
    for (let i = 0; i < 600 && (await restore()).status === "RUNNING"; i++)
      await new Promise((r) => setTimeout(r, 200));
    expect(await restore()).toMatchObject({ status: "COMPLETED", backup_id: started.body.id });
    const tables = await server.sql(
      "select to_regclass('public.before_backup') is not null as before, to_regclass('public.after_backup') as after",
    );
    expect(tables.rows).toEqual([{ before: true, after: null }]);
  });
});
