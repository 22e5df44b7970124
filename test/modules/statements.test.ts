import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt, waitForStatus } from "../management/client";
import { tenantSql, tenantSqlError } from "./sql";

/**
 * pg_stat_statements in `extensions`, where the platform's tools read it: each project sees the statements run
 * in its own database, by roles that are no superuser; another project's, and Strata's own, stay out of sight.
 */
describe("extensions.pg_stat_statements", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("shows the project its own database's statements only", async () => {
    expect(
      (
        await server.sql(
          `select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
            where e.extname = 'pg_stat_statements'`,
        )
      ).rows,
    ).toEqual([{ nspname: "extensions" }]);
    // A DATABASE_URL cluster running the tests may not preload it (the embedded one does).
    const preload = (await server.sql("select current_setting('shared_preload_libraries') as s")).rows[0].s;
    if (!String(preload).includes("pg_stat_statements")) return;
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "neighbour", organization_slug: "default-org", db_pass: "neighbour-password-1" },
    });
    expect(created.status).toBe(201);
    const other = created.body.ref as string;
    await waitForStatus(server, other, "ACTIVE_HEALTHY");
    // The neighbour's statement, its owner's; a superuser's statement in this project's database.
    await tenantSql(server, "select 1 as neighbour_marker", other);
    await server.sql("select 1 as superuser_marker");
    await tenantSql(server, "select 1 as own_marker");

    const seen = await tenantSql(
      server,
      `select query, dbid = (select oid from pg_database where datname = current_database()) as here
         from extensions.pg_stat_statements`,
    );
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((s) => s.here)).toBe(true);
    const texts = seen.map((s) => s.query).join("\n");
    expect(texts).toContain("own_marker");
    expect(texts).not.toContain("neighbour_marker");
    expect(texts).not.toContain("superuser_marker");

    // The extension's own function (the whole cluster's) and the view for the API roles: refused.
    expect(await tenantSqlError(server, "select count(*) from extensions.pg_stat_statements(true)")).toMatch(
      /permission denied/,
    );
    for (const role of ["anon", "authenticated", "service_role"])
      expect(
        await tenantSqlError(server, `set role ${role}; select count(*) from extensions.pg_stat_statements`),
      ).toMatch(/permission denied/);
    expect(await tenantSqlError(server, "select extensions.pg_stat_statements_reset()")).toMatch(
      /permission denied/,
    );
  });
});
