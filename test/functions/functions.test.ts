import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { startTestServer, type TestServer } from "../helpers/server";
import { atProjectHost, mgmt, waitForStatus } from "../management/client";

/** Deploys files through the Management API as the CLI does: multipart metadata plus one part per file. */
async function deploy(
  server: TestServer,
  ref: string,
  slug: string,
  files: Record<string, string>,
  metadata: Record<string, unknown> = {},
  query = "",
) {
  const form = new FormData();
  form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: slug, ...metadata }));
  for (const [name, content] of Object.entries(files)) form.append("file", new Blob([content]), name);
  const res = await fetch(`${server.url}/v1/projects/${ref}/functions/deploy?slug=${slug}${query}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.managementToken}` },
    body: form,
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe("Edge functions", () => {
  /** The function's text answer, or its error status and body (so a failure says what came back). */
  async function textOf(slug: string): Promise<unknown> {
    const { data, error } = await client.functions.invoke(slug, { method: "GET" });
    if (!error) return data;
    const response = (error as { context?: Response }).context;
    return `error ${response?.status}: ${await response?.text().catch(() => "")}`;
  }

  let server: TestServer;
  let client: SupabaseClient;
  const sentinel = "server-only-value-" + Math.random().toString(36).slice(2);
  let previousDatabaseUrl: string | undefined;

  beforeAll(async () => {
    // A variable of the server process that no function may see.
    process.env.STRATA_FUNCTIONS_TEST_SENTINEL = sentinel;
    server = await startTestServer({
      FUNCTIONS_CPU_MS: "1000",
      FUNCTIONS_WALL_MS: "20000",
      FUNCTIONS_MEMORY_MB: "64",
    });
    // The server process's own database URL, as a deployment passing it by environment has it.
    previousDatabaseUrl = process.env.DATABASE_URL;
    process.env.DATABASE_URL = server.dbUrl;
    client = createClient(server.url, server.anonKey);
  });
  afterAll(async () => {
    delete process.env.STRATA_FUNCTIONS_TEST_SENTINEL;
    if (previousDatabaseUrl === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = previousDatabaseUrl;
    await server.stop();
  });

  it("runs a deployed function with the project's secrets and records the invocation and its output", async () => {
    const secrets = await mgmt(server, "POST", `/v1/projects/${server.ref}/secrets`, {
      body: [{ name: "STRIPE_KEY", value: "sk_test_123" }],
    });
    expect(secrets.status).toBe(201);
    const deployed = await deploy(server, server.ref, "hello", {
      "index.ts": [
        "import { greet } from './lib/greet.ts'",
        "Deno.serve(async (req: Request) => {",
        "  const { name } = await req.json()",
        "  console.log('greeting ' + name)",
        "  return Response.json({",
        "    message: greet(name),",
        "    stripe: Deno.env.get('STRIPE_KEY'),",
        "    url: Deno.env.get('SUPABASE_URL'),",
        "    anon: Deno.env.get('SUPABASE_ANON_KEY'),",
        "    path: new URL(req.url).pathname,",
        "  })",
        "})",
      ].join("\n"),
      "lib/greet.ts": "export const greet = (n: string): string => `Hello ${n}!`",
    });
    expect(deployed.status).toBe(201);
    expect(deployed.body).toMatchObject({ slug: "hello", version: 1, verify_jwt: true });

    const { data, error } = await client.functions.invoke("hello", { body: { name: "Ada" } });
    expect(error).toBeNull();
    expect(data).toEqual({
      message: "Hello Ada!",
      stripe: "sk_test_123",
      // The project's own host on this server, whatever host the invocation came to.
      url: `http://${server.ref}.localhost:${new URL(server.url).port}`,
      anon: server.anonKey,
      path: "/hello",
    });

    // The function's files are on disk under the data directory, and its logs in the control plane.
    const dir = path.join(server.strata.ctx.config.dataDir, "functions", server.ref, "hello", "1");
    expect(existsSync(path.join(dir, "lib", "greet.ts"))).toBe(true);
    let logs: { kind: string; message: string | null; status: number | null }[] = [];
    for (let i = 0; i < 50 && logs.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 200));
      ({ rows: logs } = await server.controlSql(
        "select kind, message, status from platform.function_logs where slug = 'hello' order by id",
      ));
    }
    expect(logs).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: "console", message: "greeting Ada" }),
        expect.objectContaining({ kind: "invocation", status: 200 }),
      ]),
    );

    const stats = await mgmt(
      server,
      "GET",
      `/v1/projects/${server.ref}/analytics/endpoints/functions.combined-stats?interval=15min&function_id=${deployed.body.id}`,
    );
    expect(stats.status).toBe(200);
    expect(stats.body.result).toEqual([
      expect.objectContaining({ requests_count: 1, success_count: 1, server_err_count: 0 }),
    ]);

    const body = await mgmt(server, "GET", `/v1/projects/${server.ref}/functions/hello/body`);
    expect(body.status).toBe(200);
    expect(body.body.map((f: { name: string }) => f.name).sort()).toEqual(["index.ts", "lib/greet.ts"]);
  });

  it("keeps functions from the host's files, environment and processes and from other projects' files", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "other", organization_slug: "default-org", db_pass: "a-strong-password", region: "x" },
    });
    expect(created.status).toBe(201);
    const other: string = created.body.ref;
    await waitForStatus(server, other, "ACTIVE_HEALTHY");
    const privateFn = {
      "index.ts": "Deno.serve((req) => Response.json({ url: Deno.env.get('SUPABASE_URL') }))",
    };
    expect((await deploy(server, other, "private", privateFn, { verify_jwt: false })).status).toBe(201);
    // Each project's functions answer at its own host; the default project has no such function.
    const atHost = await atProjectHost(server, other, "/functions/v1/private", { apikey: "" });
    expect(atHost).toEqual({
      status: 200,
      body: { url: `http://${other}.localhost:${new URL(server.url).port}` },
    });
    expect((await fetch(`${server.url}/functions/v1/private`)).status).toBe(404);
    const otherFile = path.join(
      server.strata.ctx.config.dataDir,
      "functions",
      other,
      "private",
      "1",
      "index.ts",
    );
    expect(existsSync(otherFile)).toBe(true);

    await deploy(server, server.ref, "snoop", {
      "index.ts": [
        "const attempt = async (f: () => unknown) => { try { await f(); return 'allowed' } catch (e) { return (e as Error).name } }",
        "Deno.serve(async (req) => {",
        "  const otherFile = new URL(req.url).searchParams.get('file')!",
        "  return Response.json({",
        "    passwd: await attempt(() => Deno.readTextFile('/etc/passwd')),",
        "    otherProject: await attempt(() => Deno.readTextFile(otherFile)),",
        "    databaseUrl: Deno.env.get('DATABASE_URL') ?? null,",
        "    env: Deno.env.toObject(),",
        "    spawn: await attempt(() => new Deno.Command('id').output()),",
        "  })",
        "})",
      ].join("\n"),
    });
    const { data, error } = await client.functions.invoke(`snoop?file=${encodeURIComponent(otherFile)}`, {
      method: "GET",
    });
    expect(error).toBeNull();
    expect(data).toMatchObject({ passwd: "NotCapable", otherProject: "NotCapable", databaseUrl: null });
    expect(data.spawn).not.toBe("allowed");
    // Deleting the project takes its functions' files with it.
    expect((await mgmt(server, "DELETE", `/v1/projects/${other}`)).status).toBe(200);
    expect(existsSync(path.dirname(path.dirname(path.dirname(otherFile))))).toBe(false);
    expect(Object.values(data.env)).not.toContain(sentinel);
    expect(Object.values(data.env)).not.toContain(server.dbUrl);
    // Its database URL logs in as the project's own SQL role, which no other project's database admits.
    expect(new URL(data.env.SUPABASE_DB_URL).username).toBe(`strata_sql_${server.ref}`);
    expect(Object.values(data.env)).not.toContain(server.jwtSecret);
    expect(Object.keys(data.env).sort()).toEqual([
      "DENO_TLS_CA_STORE",
      "STRIPE_KEY",
      "SUPABASE_ANON_KEY",
      "SUPABASE_DB_URL",
      "SUPABASE_SERVICE_ROLE_KEY",
      "SUPABASE_URL",
      "TMPDIR",
    ]);
  });

  it("stops a function that loops forever at the CPU limit and serves the next invocation", async () => {
    await deploy(server, server.ref, "spin", {
      "index.ts": [
        "Deno.serve((req) => {",
        "  if (new URL(req.url).searchParams.has('forever')) { while (true) {} }",
        "  return new Response('fine')",
        "})",
      ].join("\n"),
    });
    const stuck = await client.functions.invoke("spin?forever", { method: "GET" });
    expect(stuck.error).not.toBeNull();
    const answer = (stuck.error as { context: Response }).context;
    expect(answer.status).toBe(546);
    expect(answer.headers.get("sb-error-code")).toBe("WORKER_RESOURCE_LIMIT");
    expect(await answer.json()).toMatchObject({ code: "WORKER_RESOURCE_LIMIT" });
    const next = await client.functions.invoke("spin", { method: "GET" });
    expect(next.error).toBeNull();
    expect(next.data).toBe("fine");
  });

  it("stops a function that outgrows the memory limit", async () => {
    await deploy(server, server.ref, "hog", {
      "index.ts": [
        "const kept: string[][] = []",
        "Deno.serve(() => {",
        "  for (;;) kept.push(Array.from({ length: 100_000 }, (_, i) => 'item ' + i))",
        "})",
      ].join("\n"),
    });
    const { error } = await client.functions.invoke("hog", { method: "GET" });
    const answer = (error as { context: Response }).context;
    expect(answer.status).toBe(546);
    expect(answer.headers.get("sb-error-code")).toBe("WORKER_RESOURCE_LIMIT");
  });

  it("serves a module's exported fetch handler, which may write temporary files", async () => {
    await deploy(server, server.ref, "exported", {
      "index.ts": [
        "export default {",
        "  async fetch(req: Request): Promise<Response> {",
        "    const file = await Deno.makeTempFile()",
        "    await Deno.writeTextFile(file, await req.text())",
        "    return new Response(await Deno.readTextFile(file))",
        "  },",
        "}",
      ].join("\n"),
    });
    const { data, error } = await client.functions.invoke("exported", { body: "kept in a scratch file" });
    expect(error).toBeNull();
    expect(data).toBe("kept in a scratch file");
  });

  it("answers 503 BOOT_ERROR at once when the module throws while it loads", async () => {
    await deploy(server, server.ref, "boot-fails", {
      "index.ts": [
        "const settings: { greeting: string } = JSON.parse('{\"greeting\": ')",
        "Deno.serve(() => new Response(settings.greeting))",
      ].join("\n"),
    });
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${server.url}/functions/v1/boot-fails`, {
        headers: { authorization: `Bearer ${server.anonKey}` },
        signal: AbortSignal.timeout(15_000),
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({
        code: "BOOT_ERROR",
        message: "Worker failed to boot (please check logs)",
      });
    }
  });

  it("sandboxes what a function answers, so a page it serves cannot act as the API's origin", async () => {
    await deploy(server, server.ref, "page", {
      "index.ts": [
        "Deno.serve(() => new Response('<script>fetch(\"/v1/projects\")</script>', {",
        "  headers: { 'content-type': 'text/html', 'content-security-policy': \"img-src 'self'\" },",
        "}))",
      ].join("\n"),
    });
    const res = await fetch(`${server.url}/functions/v1/page`, {
      headers: { authorization: `Bearer ${server.anonKey}` },
    });
    expect(res.status).toBe(200);
    // Both policies apply: the function's own and the sandbox.
    expect(res.headers.get("content-security-policy")).toBe("img-src 'self', sandbox");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("resolves imports through the deno.json next to the entrypoint", async () => {
    await deploy(
      server,
      server.ref,
      "configured",
      {
        "fn/deno.json": JSON.stringify({ imports: { "@shared/": "./shared/" } }),
        "fn/shared/shout.ts": "export const shout = (s: string): string => s.toUpperCase()",
        "fn/index.ts":
          "import { shout } from '@shared/shout.ts'\nDeno.serve(async (req) => new Response(shout(await req.text())))",
      },
      { entrypoint_path: "fn/index.ts" },
    );
    const { data, error } = await client.functions.invoke("configured", { body: "quiet" });
    expect(error).toBeNull();
    expect(data).toBe("QUIET");
  });

  it("serves 50 concurrent invocations of one function", async () => {
    await deploy(server, server.ref, "echo", {
      "index.ts": [
        "Deno.serve(async (req) => {",
        "  await new Promise((r) => setTimeout(r, 20))",
        "  return Response.json(await req.json())",
        "})",
      ].join("\n"),
    });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => client.functions.invoke("echo", { body: { i } })),
    );
    expect(results.map((r) => r.error)).toEqual(Array(50).fill(null));
    expect(results.map((r) => r.data.i)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it("runs the new code after a redeploy, refuses code that does not parse, and answers 404 after delete", async () => {
    await deploy(server, server.ref, "versioned", { "index.ts": "Deno.serve(() => new Response('one'))" });
    expect(await textOf("versioned")).toBe("one");
    const second = await deploy(server, server.ref, "versioned", {
      "index.ts": "Deno.serve(() => new Response('two'))",
    });
    expect(second.body.version).toBe(2);
    expect(await textOf("versioned")).toBe("two");

    const broken = await deploy(server, server.ref, "versioned", {
      "index.ts": "Deno.serve(() => new Response('x'",
    });
    expect(broken.status).toBe(400);
    expect(broken.body.message).toMatch(/Failed to parse index\.ts/);
    const fn = await mgmt(server, "GET", `/v1/projects/${server.ref}/functions/versioned`);
    expect(fn.body.version).toBe(2);
    expect(await textOf("versioned")).toBe("two");

    // A third version: its files and the previous version's stay on disk, older ones go.
    await deploy(server, server.ref, "versioned", { "index.ts": "Deno.serve(() => new Response('three'))" });
    expect(await textOf("versioned")).toBe("three");
    const versionsDir = path.join(server.strata.ctx.config.dataDir, "functions", server.ref, "versioned");
    expect(readdirSync(versionsDir).sort()).toEqual(["2", "3"]);

    expect((await mgmt(server, "DELETE", `/v1/projects/${server.ref}/functions/versioned`)).status).toBe(200);
    const gone = await client.functions.invoke("versioned", { method: "GET" });
    expect((gone.error as { context: Response }).context.status).toBe(404);
    expect(
      existsSync(path.join(server.strata.ctx.config.dataDir, "functions", server.ref, "versioned")),
    ).toBe(false);
  });

  it("serves bundles uploaded with bundleOnly only once a bulk update names them, all or none", async () => {
    await deploy(server, server.ref, "bundled-a", { "index.ts": "Deno.serve(() => new Response('a1'))" });
    const a = await deploy(
      server,
      server.ref,
      "bundled-a",
      { "index.ts": "Deno.serve(() => new Response('a2'))" },
      {},
      "&bundleOnly=true",
    );
    const b = await deploy(
      server,
      server.ref,
      "bundled-b",
      { "index.ts": "Deno.serve(() => new Response('b1'))" },
      {},
      "&bundleOnly=true",
    );
    expect(a.status).toBe(201);
    expect(a.body).toMatchObject({ slug: "bundled-a", version: 2 });
    expect(b.body).toMatchObject({ slug: "bundled-b", version: 1 });
    // Uploaded, not served: the old version answers, the new function does not exist yet.
    expect(await textOf("bundled-a")).toBe("a1");
    const missing = await client.functions.invoke("bundled-b", { method: "GET" });
    expect((missing.error as { context: Response }).context.status).toBe(404);

    const entry = (r: { body: any }) => {
      const { id, slug, name, status, version, verify_jwt, entrypoint_path } = r.body;
      return { id, slug, name, status, version, verify_jwt, entrypoint_path };
    };
    // One unknown entry refuses the whole update.
    const refused = await mgmt(server, "PUT", `/v1/projects/${server.ref}/functions`, {
      body: [entry(a), { ...entry(b), slug: "nowhere" }],
    });
    expect(refused.status).toBe(404);
    expect(await textOf("bundled-a")).toBe("a1");

    const updated = await mgmt(server, "PUT", `/v1/projects/${server.ref}/functions`, {
      body: [entry(a), entry(b)],
    });
    expect(updated.status).toBe(200);
    expect(updated.body.functions.map((f: any) => [f.slug, f.version])).toEqual([
      ["bundled-a", 2],
      ["bundled-b", 1],
    ]);
    expect(await textOf("bundled-a")).toBe("a2");
    expect(await textOf("bundled-b")).toBe("b1");
    const { rows } = await server.strata.ctx.platformPool.query(
      `select slug, version from platform.edge_functions where project_ref = $1 and slug like 'bundled-%'
       union all select slug, -version from platform.edge_function_bundles where project_ref = $1 order by 1, 2`,
      [server.ref],
    );
    expect(rows).toEqual([
      { slug: "bundled-a", version: 2 },
      { slug: "bundled-b", version: 1 },
    ]);
  });

  it("creates a function from one source file through the deprecated create, once", async () => {
    const create = (slug: string, source: string) =>
      fetch(`${server.url}/v1/projects/${server.ref}/functions?slug=${slug}&verify_jwt=false`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${server.managementToken}`,
          "content-type": "application/typescript",
        },
        body: source,
      });
    const created = await create("legacy", "Deno.serve(() => new Response('legacy'))");
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ slug: "legacy", version: 1, verify_jwt: false });
    const res = await fetch(`${server.url}/functions/v1/legacy`);
    expect(await res.text()).toBe("legacy");
    const again = await create("legacy", "Deno.serve(() => new Response('other'))");
    expect(again.status).toBe(400);
    const broken = await create("legacy-broken", "Deno.serve(() => new Response('x'");
    expect(broken.status).toBe(400);
    const { rows } = await server.strata.ctx.platformPool.query(
      "select slug from platform.edge_functions where project_ref = $1 and slug like 'legacy%'",
      [server.ref],
    );
    expect(rows).toEqual([{ slug: "legacy" }]);
  });

  it("refuses a missing or invalid JWT before the function runs unless verify_jwt is false", async () => {
    await deploy(server, server.ref, "guarded", {
      "index.ts": "Deno.serve((req) => Response.json({ auth: req.headers.get('authorization') }))",
    });
    const url = `${server.url}/functions/v1/guarded`;
    const missing = await fetch(url);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({ code: 401, message: "Missing authorization header" });
    const forged = await fetch(url, { headers: { authorization: "Bearer not-a-jwt" } });
    expect(forged.status).toBe(401);
    expect(await forged.json()).toEqual({ code: 401, message: "Invalid JWT" });
    const ok = await fetch(url, { headers: { authorization: `Bearer ${server.anonKey}` } });
    expect(await ok.json()).toEqual({ auth: `Bearer ${server.anonKey}` });

    await deploy(
      server,
      server.ref,
      "guarded",
      { "index.ts": "Deno.serve(() => new Response('open'))" },
      { verify_jwt: false },
    );
    const open = await fetch(url);
    expect(open.status).toBe(200);
    expect(await open.text()).toBe("open");
  });
});
