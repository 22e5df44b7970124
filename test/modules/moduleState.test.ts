import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { mgmt } from "../management/client";
import { tenantSql } from "./sql";

/**
 * The modules' state in a backup (sql/project/760_module_state.sql, src/jobs/backups/dump.ts): a restore
 * brings back the project's cron jobs and runs, net's answers and its vault secrets, which still decrypt (the
 * project keeps its key); what came after the backup is gone. Checked through the Management API's SQL and as
 * the superuser (the rows as stored).
 */
describe("cron, net and vault in backups and restores", () => {
  let server: TestServer;
  let base: string;
  beforeAll(async () => {
    server = await startTestServer();
    base = `/v1/projects/${server.ref}`;
  });
  afterAll(() => server.stop());

  const listed = async (path: string, pick: (body: any) => any) =>
    until(async () => {
      const item = pick((await mgmt(server, "GET", `${base}${path}`)).body);
      return item && item.status !== "RUNNING" ? item : undefined;
    }, 60_000);

  it("restores jobs, runs, answers and secrets that decrypt, and drops what came later", async () => {
    await tenantSql(
      server,
      `select cron.schedule('nightly', '0 3 * * *', 'select 1');
       select vault.create_secret('sk_before', 'api_key', 'kept');
       select net.http_get('http://10.255.255.1/unreachable') as request_id;`,
    );
    await until(async () => (await server.sql("select 1 from net._http_response")).rows[0], 30_000);
    await server.sql(
      `insert into cron.job_run_details (jobid, username, command, status, return_message)
       select jobid, username, command, 'succeeded', '1 row' from cron.job where jobname = 'nightly'`,
    );
    const started = await mgmt(server, "POST", `${base}/database/backups`);
    expect(started.status).toBe(201);
    const backup = await listed("/database/backups", (b) =>
      b.backups.find((x: { id: number }) => x.id === started.body.id),
    );
    expect(backup).toMatchObject({ status: "COMPLETED", error: null });
    const target = Math.ceil(Date.parse(backup.inserted_at) / 1000);
    // The file holds the secret encrypted only.
    const stored = (await server.sql("select secret from vault.secrets where name = 'api_key'")).rows[0]
      .secret;

    // After the backup: the job replaced, the secret changed, another added, the answers gone.
    await tenantSql(
      server,
      `select cron.unschedule('nightly');
       select cron.schedule('later', '1 seconds', 'select 2');
       select vault.update_secret((select id from vault.secrets where name = 'api_key'), 'sk_after');
       select vault.create_secret('sk_other', 'added_later');
       delete from net._http_response;`,
    );
    await until(() => (Date.now() / 1000 > target ? true : undefined), 5_000);
    const restore = await mgmt(server, "POST", `${base}/database/backups/restore-pitr`, {
      body: { recovery_time_target_unix: target },
    });
    expect(restore.status).toBe(201);
    const outcome = await listed("/database/backups/restores", (list) => list[list.length - 1]);
    expect(outcome).toMatchObject({ status: "COMPLETED", backup_id: backup.id, error: null });

    expect(await tenantSql(server, "select jobname, schedule, command, active from cron.job")).toEqual([
      { jobname: "nightly", schedule: "0 3 * * *", command: "select 1", active: true },
    ]);
    expect(
      await tenantSql(server, "select status, return_message from cron.job_run_details order by runid"),
    ).toEqual([{ status: "succeeded", return_message: "1 row" }]);
    expect(
      await tenantSql(server, "select name, description, decrypted_secret from vault.decrypted_secrets"),
    ).toEqual([{ name: "api_key", description: "kept", decrypted_secret: "sk_before" }]);
    expect((await server.sql("select secret from vault.secrets")).rows).toEqual([{ secret: stored }]);
    expect((await server.sql("select error_msg is not null as failed from net._http_response")).rows).toEqual(
      [{ failed: true }],
    );
    // New ids follow the restored ones, and the restored job's table takes new jobs as before.
    const [{ schedule: jobid }] = await tenantSql(
      server,
      "select cron.schedule('after-restore', '0 4 * * *', 'select 3')",
    );
    expect(jobid).toBeGreaterThan(
      (await tenantSql(server, "select jobid from cron.job where jobname = 'nightly'"))[0].jobid,
    );
    const [{ request_id }] = await tenantSql(
      server,
      "select net.http_get('http://10.255.255.1/') as request_id",
    );
    expect(Number(request_id)).toBeGreaterThan(1);
  }, 120_000);
});
