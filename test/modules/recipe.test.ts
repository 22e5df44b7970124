import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { tenantSql } from "./sql";

/**
 * The platform docs' "Scheduling Edge Functions" recipe, as written there (with every second instead of every
 * minute): the project's URL and key in vault, a cron job that posts to the deployed function with net. The
 * project's URL is this Strata's host for the project, which net reaches without leaving the machine.
 */
describe("The docs' recipe: cron + net + vault invoking an edge function", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("invokes the deployed function every second with the key from vault", async () => {
    const form = new FormData();
    form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: "hello-world" }));
    form.append(
      "file",
      new Blob([
        `Deno.serve(async (req) => {
           const { time } = await req.json();
           return Response.json({ hello: "from the function", time, auth: req.headers.get("authorization") !== null });
         });`,
      ]),
      "index.ts",
    );
    const deployed = await fetch(
      `${server.url}/v1/projects/${server.ref}/functions/deploy?slug=hello-world`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${server.managementToken}` },
        body: form,
      },
    );
    expect(deployed.status).toBe(201);

    const projectUrl = `http://${server.ref}.localhost:${new URL(server.url).port}`;
    await tenantSql(
      server,
      `select vault.create_secret('${projectUrl}', 'project_url');
       select vault.create_secret('${server.anonKey}', 'anon_key');`,
    );
    await tenantSql(
      server,
      `select
         cron.schedule(
           'invoke-function-every-second',
           '1 seconds',
           $$
           select
             net.http_post(
                 url:= (select decrypted_secret from vault.decrypted_secrets where name = 'project_url') || '/functions/v1/hello-world',
                 headers:=jsonb_build_object(
                   'Content-type', 'application/json',
                   'Authorization', 'Bearer ' || (select decrypted_secret from vault.decrypted_secrets where name = 'anon_key')
                 ),
                 body:=concat('{"time": "', now(), '"}')::jsonb
             ) as request_id;
           $$
         );`,
    );

    const answers = await until(async () => {
      const { rows } = await server.sql(
        "select status_code, content, error_msg from net._http_response order by id",
      );
      return rows.filter((r) => r.status_code === 200).length >= 3 ? rows : undefined;
    }, 60_000);
    const invoked = answers.filter((r) => r.status_code === 200).map((r) => JSON.parse(r.content));
    expect(invoked[0]).toMatchObject({ hello: "from the function", auth: true });
    // One call per run, each with its own time.
    expect(new Set(invoked.map((a) => a.time)).size).toBe(invoked.length);
    const runs = (await server.sql("select status, return_message from cron.job_run_details")).rows;
    expect(runs.filter((r) => r.status === "succeeded").length).toBeGreaterThanOrEqual(3);
    expect(runs.find((r) => r.status === "succeeded").return_message).toBe("1 row");
    await tenantSql(server, "select cron.unschedule('invoke-function-every-second')");
  }, 90_000);
});
