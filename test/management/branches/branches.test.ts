import http from "node:http";
import type { AddressInfo } from "node:net";
import { mintLegacyKey } from "../../../src/auth/legacyKeys";
import { startTestServer, type TestServer } from "../../helpers/server";
import { atProjectHost, mgmt } from "../client";
import { allowLoopbackForTests } from "../../../src/net/outbound";

// The notify_url receiver listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

/** Polls an action run until none of its steps is CREATED or RUNNING; answers it. */
async function finishedRun(server: TestServer, ref: string, runId: string): Promise<any> {
  for (let i = 0; i < 100; i++) {
    const run = await mgmt(server, "GET", `/v1/projects/${ref}/actions/${runId}`);
    expect(run.status).toBe(200);
    // Done: every step EXITED, or one DEAD (the steps after it never run).
    const statuses = run.body.run_steps.map((s: any) => s.status);
    if (statuses.includes("DEAD") || statuses.every((s: string) => s === "EXITED")) return run.body;
    await new Promise((r) => setTimeout(r, 200));
  }
  const last = await mgmt(server, "GET", `/v1/projects/${ref}/actions/${runId}`);
  throw new Error(
    `action run ${runId} did not finish: ${JSON.stringify(last.body)} ${await logsOf(server, ref, runId)}`,
  );
}

async function logsOf(server: TestServer, ref: string, runId: string): Promise<string> {
  const res = await fetch(`${server.url}/v1/projects/${ref}/actions/${runId}/logs`, {
    headers: { authorization: `Bearer ${server.managementToken}` },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
  return res.text();
}

const exists = async (server: TestServer, database: string) =>
  (await server.sql("select 1 from pg_database where datname = $1", [database])).rowCount === 1;

describe("branches and action runs", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
  });
  afterAll(async () => {
    const { rows } = await server.controlSql("select project_ref from platform.branches");
    for (const { project_ref } of rows) await mgmt(server, "DELETE", `/v1/branches/${project_ref}`);
    await server.stop();
  });

  it("creates a branch from the parent's migrations and rows, merges its migration, and deletes it", async () => {
    const parent = server.ref;
    expect((await mgmt(server, "GET", `/v1/projects/${parent}/branches`)).body).toEqual([]);
    const base = await mgmt(server, "POST", `/v1/projects/${parent}/database/migrations`, {
      body: { name: "base", query: "create table public.items (id serial primary key, title text not null)" },
    });
    expect(base.status).toBe(200);
    await server.sql("insert into public.items (title) values ('one'), ('two')");

    const created = await mgmt(server, "POST", `/v1/projects/${parent}/branches`, {
      body: { branch_name: "feature-x", with_data: true, git_branch: "feature/x" },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "feature-x",
      parent_project_ref: parent,
      is_default: false,
      with_data: true,
      git_branch: "feature/x",
    });
    const ref: string = created.body.project_ref;
    expect(ref).toMatch(/^[a-z]{20}$/);
    expect(ref).not.toBe(parent);

    const runs = await mgmt(server, "GET", `/v1/projects/${ref}/actions`);
    expect(runs.status).toBe(200);
    expect(runs.body).toHaveLength(1);
    const createRun = await finishedRun(server, ref, runs.body[0].id);
    expect(createRun.run_steps.map((s: any) => [s.name, s.status])).toEqual([
      ["clone", "EXITED"],
      ["migrate", "EXITED"],
      ["seed", "EXITED"],
      ["health", "EXITED"],
    ]);
    expect(await logsOf(server, ref, createRun.id)).toMatch(/copied 2 row\(s\) of public\.items/);

    // The branch is a project of its own: own keys, own host, the parent's migrations and rows.
    const listed = await mgmt(server, "GET", `/v1/projects/${parent}/branches`);
    expect(listed.body.map((b: any) => [b.name, b.status])).toEqual([["feature-x", "MIGRATIONS_PASSED"]]);
    expect((await mgmt(server, "GET", `/v1/projects/${parent}/branches/feature-x`)).body.project_ref).toBe(
      ref,
    );
    const config = await mgmt(server, "GET", `/v1/branches/${ref}`);
    expect(config.status).toBe(200);
    expect(config.body).toMatchObject({ ref, status: "ACTIVE_HEALTHY", db_user: `postgres_${ref}` });
    expect(config.body.jwt_secret).not.toBe(server.jwtSecret);
    const { rows } = await server.controlSql("select legacy_keys_iat from platform.projects where ref = $1", [
      ref,
    ]);
    const anonKey = await mintLegacyKey(config.body.jwt_secret, "anon", Number(rows[0].legacy_keys_iat));
    const read = await atProjectHost(server, ref, "/rest/v1/items?select=title&order=id", {
      apikey: anonKey,
    });
    expect(read.status).toBe(200);
    expect(read.body).toEqual([{ title: "one" }, { title: "two" }]);
    const migrations = await mgmt(server, "GET", `/v1/projects/${ref}/database/migrations`);
    expect(migrations.body.map((m: any) => m.name)).toEqual(["base"]);

    // A migration made on the branch reaches the parent by merge.
    const added = await mgmt(server, "POST", `/v1/projects/${ref}/database/migrations`, {
      body: { name: "tags", query: "create table public.tags (id int primary key, label text)" },
    });
    expect(added.status).toBe(200);
    expect((await server.sql("select to_regclass('public.tags') as t")).rows[0].t).toBeNull();
    const merge = await mgmt(server, "POST", `/v1/branches/${ref}/merge`, { body: {} });
    expect(merge.status).toBe(201);
    const mergeRun = await finishedRun(server, parent, merge.body.workflow_run_id);
    expect(mergeRun.run_steps).toEqual([expect.objectContaining({ name: "migrate", status: "EXITED" })]);
    expect((await server.sql("select to_regclass('public.tags') as t")).rows[0].t).toBe("tags");
    const parentMigrations = await mgmt(server, "GET", `/v1/projects/${parent}/database/migrations`);
    expect(parentMigrations.body.map((m: any) => m.name)).toEqual(["base", "tags"]);

    // A failing migration fails its run and leaves the target as it was: push applies both or neither.
    for (const [name, query] of [
      ["good", "create table public.half (id int)"],
      ["bad", "select 1 / 0"],
    ]) {
      expect(
        (await mgmt(server, "PUT", `/v1/projects/${ref}/database/migrations`, { body: { name, query } }))
          .status,
      ).toBe(200);
    }
    const push = await mgmt(server, "POST", `/v1/branches/${ref}/push`, { body: {} });
    expect(push.status).toBe(201);
    const pushRun = await finishedRun(server, ref, push.body.workflow_run_id);
    expect(pushRun.run_steps).toEqual([expect.objectContaining({ name: "migrate", status: "DEAD" })]);
    expect(await logsOf(server, ref, pushRun.id)).toMatch(/division by zero/);
    const half = await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, {
      body: { query: "select to_regclass('public.half') as t" },
    });
    expect(half.body).toEqual([{ t: null }]);
    expect((await mgmt(server, "GET", `/v1/projects/${parent}/branches/feature-x`)).body.status).toBe(
      "MIGRATIONS_FAILED",
    );

    // Bad input answers 4xx in the Management API's format.
    const bad = [
      await mgmt(server, "POST", `/v1/projects/${parent}/branches`, { body: {} }),
      await mgmt(server, "POST", `/v1/projects/${parent}/branches`, { body: { branch_name: "feature-x" } }),
      await mgmt(server, "POST", `/v1/branches/${ref}/merge`, { body: { migration_version: "1" } }),
      await mgmt(server, "GET", `/v1/branches/nosuchbranchnosuchbr`),
      await mgmt(server, "PATCH", `/v1/branches/${ref}`, { body: { color: "red" } }),
      await mgmt(server, "GET", `/v1/projects/${ref}/actions/not-a-run`),
      await mgmt(server, "POST", `/v1/branches/${ref}/restore`),
    ];
    expect(bad.map((r) => r.status)).toEqual([400, 409, 400, 404, 400, 404, 400]);
    for (const r of bad) expect(typeof r.body.message).toBe("string");

    // Updating; deleting with a grace period, restoring, then deleting for good.
    const patched = await mgmt(server, "PATCH", `/v1/branches/${ref}`, {
      body: { branch_name: "feature-y", persistent: true },
    });
    expect(patched.body).toMatchObject({ name: "feature-y", persistent: true });
    expect((await mgmt(server, "DELETE", `/v1/branches/${ref}?force=false`)).status).toBe(200);
    const scheduled = await mgmt(server, "GET", `/v1/projects/${parent}/branches/feature-y`);
    expect(scheduled.body).toMatchObject({ preview_project_status: "INACTIVE" });
    expect(scheduled.body.deletion_scheduled_at).toEqual(expect.any(String));
    expect((await mgmt(server, "POST", `/v1/branches/${ref}/restore`)).status).toBe(200);
    const restored = await mgmt(server, "GET", `/v1/projects/${parent}/branches/feature-y`);
    expect(restored.body.preview_project_status).toBe("ACTIVE_HEALTHY");
    expect(restored.body.deletion_scheduled_at).toBeUndefined();

    expect(await exists(server, `project_${ref}`)).toBe(true);
    const deleted = await mgmt(server, "DELETE", `/v1/branches/${ref}`);
    expect(deleted).toMatchObject({ status: 200, body: { message: "ok" } });
    expect(await exists(server, `project_${ref}`)).toBe(false);
    expect((await mgmt(server, "GET", `/v1/projects/${parent}/branches`)).body).toEqual([]);
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).status).toBe(404);
  });

  it("resets a branch to its parent, keeping its ref and keys, and tells its notify_url", async () => {
    const parent = server.ref;
    const notices: any[] = [];
    const receiver = http.createServer((req, res) => {
      let text = "";
      req.on("data", (c) => (text += c));
      req.on("end", () => {
        notices.push(JSON.parse(text));
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const notifyUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/branches`;
    const created = await mgmt(server, "POST", `/v1/projects/${parent}/branches`, {
      body: { branch_name: "reset-me", notify_url: notifyUrl },
    });
    const ref: string = created.body.project_ref;
    const [first] = (await mgmt(server, "GET", `/v1/projects/${ref}/actions`)).body;
    await finishedRun(server, ref, first.id);
    receiver.close();
    expect(notices).toEqual([
      expect.objectContaining({ type: "branch.status", project_ref: ref, status: "RUNNING_MIGRATIONS" }),
      expect.objectContaining({ type: "branch.status", project_ref: ref, status: "MIGRATIONS_PASSED" }),
    ]);
    // Without with_data the branch has the parent's tables but none of its rows.
    const empty = await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, {
      body: { query: "select count(*)::int as n from public.items" },
    });
    expect(empty.body).toEqual([{ n: 0 }]);
    await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, {
      body: { query: "create table public.scratch (id int); insert into public.items (title) values ('x')" },
    });
    const secret = (await mgmt(server, "GET", `/v1/branches/${ref}`)).body.jwt_secret;

    const reset = await mgmt(server, "POST", `/v1/branches/${ref}/reset`, { body: {} });
    expect(reset.status).toBe(201);
    const run = await finishedRun(server, ref, reset.body.workflow_run_id);
    expect(run.run_steps.map((s: any) => s.status)).toEqual(["EXITED", "EXITED", "EXITED"]);
    const after = await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, {
      body: {
        query:
          "select to_regclass('public.scratch') as scratch, to_regclass('public.tags') as tags, (select count(*)::int from public.items) as n",
      },
    });
    expect(after.body).toEqual([{ scratch: null, tags: "tags", n: 0 }]);
    expect((await mgmt(server, "GET", `/v1/branches/${ref}`)).body.jwt_secret).toBe(secret);

    // Setting a step's status as a runner would.
    const status = await mgmt(server, "PATCH", `/v1/projects/${ref}/actions/${run.id}/status`, {
      body: { health: "PAUSED" },
    });
    expect(status.status).toBe(200);
    const paused = await mgmt(server, "GET", `/v1/projects/${ref}/actions/${run.id}`);
    expect(paused.body.run_steps.find((s: any) => s.name === "health").status).toBe("PAUSED");
    expect(
      (
        await mgmt(server, "PATCH", `/v1/projects/${ref}/actions/${run.id}/status`, {
          body: { seed: "DEAD" },
        })
      ).status,
    ).toBe(400);
  });
});
