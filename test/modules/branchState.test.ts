import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { mgmt } from "../management/client";
import { tenantSql } from "./sql";

/**
 * A branch is a new project with a vault key of its own (README "Database modules"): it is built from its
 * parent's migrations, so the jobs and secrets those make are made again there (encrypted for the branch's
 * key, and decrypting), and a copy of the parent's rows (with_data) leaves the modules' state out. Checked
 * through the Management API's SQL on both projects and as the superuser.
 */
describe("cron and vault in a branch", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
  });
  afterAll(async () => {
    const { rows } = await server.controlSql("select project_ref from platform.branches");
    for (const { project_ref } of rows) await mgmt(server, "DELETE", `/v1/branches/${project_ref}`);
    await server.stop();
  });

  it("makes again what the migrations made, and copies no other job or secret", async () => {
    const parent = server.ref;
    const migration = await mgmt(server, "POST", `/v1/projects/${parent}/database/migrations`, {
      body: {
        name: "modules",
        query: `create extension if not exists pg_cron with schema pg_catalog;
                select vault.create_secret('from-the-migration', 'migrated');
                select cron.schedule('migrated-job', '0 5 * * *', 'select 1');`,
      },
    });
    expect(migration.status).toBe(200);
    await tenantSql(
      server,
      `select vault.create_secret('parent-only', 'parent_secret');
       select cron.schedule('parent-job', '0 6 * * *', 'select 2');`,
    );

    const created = await mgmt(server, "POST", `/v1/projects/${parent}/branches`, {
      body: { branch_name: "modules", with_data: true },
    });
    expect(created.status).toBe(201);
    const ref: string = created.body.project_ref;
    const run = await until(async () => {
      const [last] = (await mgmt(server, "GET", `/v1/projects/${ref}/actions`)).body ?? [];
      const got = last && (await mgmt(server, "GET", `/v1/projects/${ref}/actions/${last.id}`)).body;
      const statuses: string[] = got?.run_steps?.map((s: { status: string }) => s.status) ?? [];
      return statuses.length && (statuses.includes("DEAD") || statuses.every((s) => s === "EXITED"))
        ? statuses
        : undefined;
    }, 90_000);
    expect(run.every((s) => s === "EXITED")).toBe(true);

    expect(
      await tenantSql(
        server,
        "select name, decrypted_secret from vault.decrypted_secrets order by name",
        ref,
      ),
    ).toEqual([{ name: "migrated", decrypted_secret: "from-the-migration" }]);
    expect(await tenantSql(server, "select jobname, username from cron.job", ref)).toEqual([
      { jobname: "migrated-job", username: `postgres_${ref}` },
    ]);
    // The parent keeps its own, and each project's key is its own: the same secret is another ciphertext.
    expect(
      (await tenantSql(server, "select name from vault.decrypted_secrets order by name")).map((s) => s.name),
    ).toEqual(["migrated", "parent_secret"]);
    const { rows: keys } = await server.controlSql(
      "select project_ref from platform.vault_keys where project_ref = any($1) order by 1",
      [[parent, ref].sort()],
    );
    expect(keys.map((k) => k.project_ref)).toEqual([parent, ref].sort());
  }, 150_000);
});
