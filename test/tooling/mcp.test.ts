import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { platformMcp, untrusted, type Mcp } from "./clients";

/**
 * The platform's MCP server (npm `@supabase/mcp-server-supabase`, pinned) run unchanged against Strata over
 * stdio: its tools that need no internet, their effects shown through SQL or another API.
 */

jest.setTimeout(600_000);

describe("the platform's MCP server against Strata", () => {
  let server: TestServer;
  let mcp: Mcp;
  let ref: string;

  beforeAll(async () => {
    server = await startTestServer();
    ref = server.ref;
    mcp = await platformMcp(server);
  });
  afterAll(async () => {
    mcp.close();
    await server.stop();
  });

  it("offers its tools and reads the organization by the id it lists", async () => {
    expect(await mcp.tools()).toEqual(
      expect.arrayContaining(["list_projects", "execute_sql", "deploy_edge_function", "query_logs"]),
    );
    const { organizations } = await mcp.call("list_organizations", {});
    expect(organizations).toHaveLength(1);
    const org = await mcp.call("get_organization", { id: organizations[0].id });
    expect(org).toMatchObject({ id: organizations[0].id, name: "Default Organization" });
    const { projects } = await mcp.call("list_projects", {});
    expect(projects).toEqual([expect.objectContaining({ id: ref, organization_id: org.id })]);
    expect(await mcp.call("get_project", { id: ref })).toMatchObject({ id: ref, status: "ACTIVE_HEALTHY" });
    const { keys } = await mcp.call("get_publishable_keys", { project_id: ref });
    expect(keys).toContainEqual(expect.objectContaining({ name: "anon", api_key: server.anonKey }));
  });

  it("runs SQL (execute_sql) and lists the tables it made (list_tables)", async () => {
    const made = await mcp.call("execute_sql", {
      project_id: ref,
      query: `create table public.notes (id bigint generated always as identity primary key, body text);
              insert into public.notes (body) values ('from the agent') returning id, body`,
    });
    expect(untrusted(made.result)).toEqual([{ id: 1, body: "from the agent" }]);
    expect((await server.sql("select body from public.notes")).rows).toEqual([{ body: "from the agent" }]);
    const { tables } = await mcp.call("list_tables", { project_id: ref, schemas: ["public"] });
    expect(tables).toEqual([expect.objectContaining({ name: "public.notes", rls_enabled: false })]);
    await mcp.call("execute_sql", {
      project_id: ref,
      query: "create table public.note_tags (note_id bigint references public.notes (id), tag text)",
    });
    const verbose = await mcp.call("list_tables", { project_id: ref, schemas: ["public"], verbose: true });
    expect(verbose.tables).toContainEqual(
      expect.objectContaining({
        name: "public.note_tags",
        columns: [expect.objectContaining({ name: "note_id" }), expect.objectContaining({ name: "tag" })],
        foreign_key_constraints: [
          expect.objectContaining({ source_table: "public.note_tags", target_table: "public.notes" }),
        ],
      }),
    );
  });

  it("runs read-only and scoped to one project when started so (--read-only --project-ref)", async () => {
    const scoped = await platformMcp(server, ["--read-only", "--project-ref", ref]);
    try {
      const refused = await scoped.fails("execute_sql", { query: "create table public.not_made (id int)" });
      expect(refused).toMatch(/read-only/);
      expect((await server.sql("select to_regclass('public.not_made') as t")).rows).toEqual([{ t: null }]);
      const read = await scoped.call("execute_sql", { query: "select 1 + 1 as two" });
      expect(untrusted(read.result)).toEqual([{ two: 2 }]);
    } finally {
      scoped.close();
    }
  });

  it("applies a migration and lists it (apply_migration, list_migrations)", async () => {
    expect(
      await mcp.call("apply_migration", {
        project_id: ref,
        name: "add_tags",
        query: "create table public.tags (id int primary key, label text)",
      }),
    ).toEqual({ success: true });
    const { migrations } = await mcp.call("list_migrations", { project_id: ref });
    expect(migrations).toContainEqual(expect.objectContaining({ name: "add_tags" }));
    expect((await server.sql("select to_regclass('public.tags') is not null as made")).rows).toEqual([
      { made: true },
    ]);
  });

  it("creates a project after confirming its cost, and a branch of it", async () => {
    const { organizations } = await mcp.call("list_organizations", {});
    const cost = await mcp.call("get_cost", { type: "project", organization_id: organizations[0].id });
    const { confirmation_id } = await mcp.call("confirm_cost", cost);
    const made = await mcp.call("create_project", {
      name: "agent-made",
      organization_id: organizations[0].id,
      region: "us-east-1",
      confirm_cost_id: confirmation_id,
    });
    const { rows } = await server.controlSql(
      `select o.slug from platform.projects p join platform.organizations o on o.id = p.organization_id
        where p.ref = $1`,
      [made.id],
    );
    expect(rows).toEqual([{ slug: organizations[0].id }]);
    const status = async () =>
      (await server.controlSql("select status from platform.projects where ref = $1", [made.id])).rows[0]
        .status;
    const until = async (wanted: string) => {
      for (let i = 0; i < 300 && (await status()) !== wanted; i++)
        await new Promise((r) => setTimeout(r, 200));
      expect(await status()).toBe(wanted);
    };
    await until("ACTIVE_HEALTHY");
    expect(await mcp.call("pause_project", { project_id: made.id })).toEqual({ success: true });
    await until("INACTIVE");
    expect(await mcp.call("restore_project", { project_id: made.id })).toEqual({ success: true });
    await until("ACTIVE_HEALTHY");
    expect(await mcp.call("get_project", { id: made.id })).toMatchObject({ status: "ACTIVE_HEALTHY" });

    const branchCost = await mcp.call("get_cost", { type: "branch", organization_id: organizations[0].id });
    const branchConfirmation = await mcp.call("confirm_cost", branchCost);
    const branch = await mcp.call("create_branch", {
      project_id: ref,
      name: "agent-branch",
      confirm_cost_id: branchConfirmation.confirmation_id,
    });
    const { branches } = await mcp.call("list_branches", { project_id: ref });
    expect(branches).toContainEqual(expect.objectContaining({ id: branch.id, name: "agent-branch" }));
    // A branch serves once its database is made: then a migration applied on it merges into the parent, and
    // the branch rebases onto and resets to the parent's history.
    for (let i = 0; i < 300; i++) {
      const listed = (await mcp.call("list_branches", { project_id: ref })).branches;
      if (listed.find((b: { id: string }) => b.id === branch.id)?.preview_project_status === "ACTIVE_HEALTHY")
        break;
      await new Promise((r) => setTimeout(r, 200));
    }
    await mcp.call("apply_migration", {
      project_id: branch.project_ref,
      name: "made_on_branch",
      query: "create table public.made_on_branch (id int primary key)",
    });
    expect(await mcp.call("merge_branch", { branch_id: branch.id })).toEqual({ success: true });
    for (
      let i = 0;
      i < 300 && (await server.sql("select to_regclass('public.made_on_branch') as t")).rows[0].t === null;
      i++
    )
      await new Promise((r) => setTimeout(r, 200));
    const { migrations } = await mcp.call("list_migrations", { project_id: ref });
    expect(migrations).toContainEqual(expect.objectContaining({ name: "made_on_branch" }));
    expect(await mcp.call("rebase_branch", { branch_id: branch.id })).toEqual({ success: true });
    expect(await mcp.call("reset_branch", { branch_id: branch.id })).toEqual({ success: true });
    expect(await mcp.call("delete_branch", { branch_id: branch.id })).toEqual({ success: true });
  });

  it("lists extensions and reads every service's logs (list_extensions, get_logs)", async () => {
    const { extensions } = await mcp.call("list_extensions", { project_id: ref });
    expect(extensions).toContainEqual(
      expect.objectContaining({ name: "pg_stat_statements", schema: "extensions" }),
    );
    for (const service of [
      "api",
      "branch-action",
      "postgres",
      "edge-function",
      "auth",
      "storage",
      "realtime",
    ]) {
      const logs = untrusted((await mcp.call("get_logs", { project_id: ref, service })).result);
      expect(logs).toMatchObject({ result: expect.any(Array) });
    }
  });

  it("generates TypeScript types with never-written identity columns", async () => {
    await server.sql(
      "create table if not exists public.typed (id int generated always as identity, label text)",
    );
    const { types } = await mcp.call("generate_typescript_types", { project_id: ref });
    const typed = types.slice(types.indexOf("typed: {"));
    expect(typed.slice(typed.indexOf("Insert: {"), typed.indexOf("Update: {"))).toMatch(/id\?: never/);
    expect(types).not.toMatch(/_strata/);
  });

  it("deploys a function of several files, lists it and reads its files back", async () => {
    const files = [
      { name: "index.ts", content: "import { x } from './lib/x.ts';\nDeno.serve(() => new Response(x));" },
      { name: "lib/x.ts", content: "export const x = 'from the agent';" },
    ];
    const deployed = await mcp.call("deploy_edge_function", {
      project_id: ref,
      name: "agent-fn",
      entrypoint_path: "index.ts",
      verify_jwt: false,
      files,
    });
    expect(deployed).toMatchObject({ slug: "agent-fn", status: "ACTIVE", version: 1 });
    expect(await (await fetch(`${server.url}/functions/v1/agent-fn`)).text()).toBe("from the agent");

    const { functions } = await mcp.call("list_edge_functions", { project_id: ref });
    expect(functions).toEqual([expect.objectContaining({ slug: "agent-fn", entrypoint_path: "index.ts" })]);
    const fn = await mcp.call("get_edge_function", { project_id: ref, function_slug: "agent-fn" });
    expect(fn).toMatchObject({ slug: "agent-fn", entrypoint_path: "index.ts" });
    expect(fn.files).toEqual(expect.arrayContaining(files));

    // A second deploy of what get_edge_function answered makes version 2 with the same files.
    files[1].content = "export const x = 'changed by the agent';";
    const again = await mcp.call("deploy_edge_function", {
      project_id: ref,
      name: "agent-fn",
      entrypoint_path: fn.entrypoint_path,
      verify_jwt: false,
      files,
    });
    expect(again).toMatchObject({ slug: "agent-fn", version: 2 });
    expect(await (await fetch(`${server.url}/functions/v1/agent-fn`)).text()).toBe("changed by the agent");
    const body = await mgmt(server, "GET", `/v1/projects/${ref}/functions/agent-fn/body`);
    expect(body.body).toEqual(expect.arrayContaining(files));
  });

  it("queries the unified logs stream with the SQL its tool description teaches (query_logs)", async () => {
    expect((await fetch(`${server.url}/rest/v1/notes`, { headers: { apikey: server.anonKey } })).status).toBe(
      200,
    );
    const query = (sql: string) =>
      mcp.call("query_logs", { project_id: ref, sql }).then((r) => untrusted(r.result));
    const sources = await query("select distinct source from logs");
    expect(sources.result).toContainEqual({ source: "edge_logs" });
    const requests = await query(
      `select event_message, log_attributes['request.method'] as method,
              log_attributes['response.status_code'] as status
         from logs where source = 'edge_logs' and event_message like '%/rest/v1/notes%'`,
    );
    expect(requests.result).toContainEqual({
      event_message: expect.stringContaining("/rest/v1/notes"),
      method: "GET",
      status: 200,
    });
  });

  it("reports the user's advisories and none of Strata's own objects (get_advisors)", async () => {
    const security = await mcp.call("get_advisors", { project_id: ref, type: "security" });
    // The MCP server groups the API's lints by name, each with its findings.
    const rls = (security.result?.lints ?? security.lints).find(
      (l: { name: string }) => l.name === "rls_disabled_in_public",
    );
    expect(rls.findings).toContainEqual(
      expect.objectContaining({ metadata: { name: "notes", schema: "public", type: "table" } }),
    );
    const performance = await mcp.call("get_advisors", { project_id: ref, type: "performance" });
    expect(JSON.stringify([security, performance])).not.toMatch(/_strata|strata_/);
  });

  it("reads storage buckets and config", async () => {
    const made = await fetch(`${server.url}/storage/v1/bucket`, {
      method: "POST",
      headers: {
        apikey: server.serviceKey,
        authorization: `Bearer ${server.serviceKey}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ name: "avatars", public: true }),
    });
    expect(made.status).toBe(200);
    const { buckets } = await mcp.call("list_storage_buckets", { project_id: ref });
    expect(buckets).toEqual([expect.objectContaining({ name: "avatars", public: true })]);
    const config = await mcp.call("get_storage_config", { project_id: ref });
    expect(config.fileSizeLimit).toEqual(expect.any(Number));
    const wanted = {
      fileSizeLimit: 1234567,
      features: { imageTransformation: { enabled: true }, s3Protocol: { enabled: false } },
    };
    expect(await mcp.call("update_storage_config", { project_id: ref, config: wanted })).toEqual({
      success: true,
    });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/config/storage`)).body).toMatchObject(wanted);
    expect(await mcp.call("get_storage_config", { project_id: ref })).toMatchObject(wanted);
  });
});
