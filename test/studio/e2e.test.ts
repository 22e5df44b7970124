import type { Browser, Page } from "playwright-core";
import { withDatabase } from "../../src/db/urls";
import { adminQuery } from "../helpers/db";
import { startTestServer, type TestServer } from "../helpers/server";
import { atProjectHost, mgmt } from "../management/client";
import { buildStudio, launchChromium, VIEWPORT } from "./browser";

/**
 * Studio in a real Chromium against a real server: sign in, create a project, build tables with a foreign key,
 * edit rows, run SQL, sign out. Every effect is checked through another channel too (REST with the project's
 * key, SQL as the superuser, the control plane's rows).
 */

jest.setTimeout(300_000);

/** A 1×1 PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

describe("Studio in a browser", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let ref: string;

  beforeAll(async () => {
    buildStudio();
    server = await startTestServer();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: VIEWPORT });
    page.setDefaultTimeout(60_000);
    // A fault of the page's own shows in the test's output.
    page.on("pageerror", (e) => console.error("page error:", e));
  });
  afterAll(async () => {
    await browser?.close();
    if (ref) await mgmt(server, "DELETE", `/v1/projects/${ref}`);
    await server?.stop();
  });

  /** SQL as the superuser in the new project's database. */
  async function projectSql(text: string) {
    const { rows } = await server.controlSql("select database_name from platform.projects where ref = $1", [
      ref,
    ]);
    return adminQuery(text, [], withDatabase(server.dbUrl, rows[0].database_name));
  }

  it("signs in with a management token", async () => {
    await page.goto(`${server.url}/projects`);
    await page.waitForURL(/\/sign-in\?next=%2Fprojects/);
    await page.getByLabel("Access token").fill("sbp_not_a_token");
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.getByRole("alert").filter({ hasText: "not valid" }).waitFor();

    await page.getByLabel("Access token").fill(server.managementToken);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.waitForURL(/\/projects$/);
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    const [cookie] = await page.context().cookies();
    expect(cookie).toMatchObject({ name: "strata_studio", httpOnly: true, sameSite: "Strict" });
    expect(
      (await server.controlSql("select count(*)::int as n from platform.studio_sessions")).rows[0].n,
    ).toBe(1);
  });

  it("creates a project and shows its progress until it is active", async () => {
    await page.getByRole("button", { name: "New project" }).click();
    const form = page.getByRole("form", { name: "New project" });
    await form.getByLabel("Name").fill("bookshop");
    await form.getByLabel("Database password").fill("a-strong-password");
    await form.getByRole("button", { name: "Create project" }).click();
    const card = page.locator(".project-card", { hasText: "bookshop" });
    await card.waitFor();
    ref = (await card.getAttribute("data-ref"))!;
    expect(ref).toMatch(/^[a-z]{20}$/);
    await card.getByText("Active", { exact: true }).waitFor({ timeout: 180_000 });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).body.status).toBe("ACTIVE_HEALTHY");
  });

  it("creates two tables joined by a foreign key, showing the SQL it runs", async () => {
    await page.locator(".project-card", { hasText: "bookshop" }).getByRole("link").first().click();
    await page.waitForURL(new RegExp(`/project/${ref}/editor`));

    await page.getByRole("button", { name: "New table" }).click();
    let form = page.getByRole("form", { name: "New table" });
    await form.getByLabel("Name", { exact: true }).fill("authors");
    await form.getByRole("button", { name: "Add column" }).click();
    await form.getByLabel("Column name").nth(2).fill("name");
    await expect(form.getByLabel("SQL to run").textContent()).resolves.toContain('"name" text');
    await form.getByRole("button", { name: "Create table" }).click();
    await page.getByRole("heading", { name: "public.authors" }).waitFor();

    await page.getByRole("button", { name: "New table" }).click();
    form = page.getByRole("form", { name: "New table" });
    await form.getByLabel("Name", { exact: true }).fill("books");
    await form.getByRole("button", { name: "Add column" }).click();
    await form.getByLabel("Column name").nth(2).fill("title");
    await form.getByRole("button", { name: "Add column" }).click();
    await form.getByLabel("Column name").nth(3).fill("author_id");
    await form.getByLabel("Column type").nth(3).selectOption("bigint");
    await form.getByLabel("References").nth(3).selectOption("authors.id");
    const sql = await form.getByLabel("SQL to run").textContent();
    expect(sql).toContain('"author_id" bigint references "public"."authors" ("id")');
    await form.getByRole("button", { name: "Create table" }).click();
    await page.getByRole("heading", { name: "public.books" }).waitFor();

    const fk = await projectSql(
      `select confrelid::regclass::text as target from pg_constraint
        where contype = 'f' and conrelid = 'public.books'::regclass`,
    );
    expect(fk.rows).toEqual([{ target: "authors" }]);
  });

  it("inserts and edits rows, which REST then serves", async () => {
    await page.getByRole("button", { name: "authors" }).click();
    await page.getByRole("heading", { name: "public.authors" }).waitFor();
    await page.getByRole("button", { name: "Insert row" }).click();
    await page.getByRole("form", { name: "Insert row" }).getByLabel(/^name/).fill("Ada Lovelace");
    await page.getByRole("button", { name: "Insert", exact: true }).click();
    await page.getByRole("cell", { name: "Ada Lovelace" }).waitFor();

    await page.getByRole("button", { name: "books" }).click();
    await page.getByRole("heading", { name: "public.books" }).waitFor();
    await page.getByRole("button", { name: "Insert row" }).click();
    const insert = page.getByRole("form", { name: "Insert row" });
    await insert.getByLabel(/^title/).fill("Notes");
    await insert.getByLabel(/^author_id/).fill("1");
    await page.getByRole("button", { name: "Insert", exact: true }).click();
    await page.getByRole("cell", { name: "Notes" }).waitFor();

    await page.getByRole("row", { name: "1" }).click();
    const edit = page.getByRole("form", { name: "Edit row" });
    await edit.getByLabel(/^title/).fill("Notes on the Analytical Engine");
    await edit.getByRole("button", { name: "Save" }).click();
    await page.getByRole("cell", { name: "Notes on the Analytical Engine" }).waitFor();

    // Second channel: the project's REST API, with its own key.
    const keys = (await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`)).body;
    const serviceKey = keys.find((k: { name: string }) => k.name === "service_role").api_key;
    const rest = await atProjectHost(server, ref, "/rest/v1/books?select=title,author:authors(name)", {
      apikey: serviceKey,
    });
    expect(rest.status).toBe(200);
    expect(rest.body).toEqual([
      { title: "Notes on the Analytical Engine", author: { name: "Ada Lovelace" } },
    ]);

    // Server-side sorting and filtering, then deleting a row.
    await page.getByRole("button", { name: "Insert row" }).click();
    const second = page.getByRole("form", { name: "Insert row" });
    await second.getByLabel(/^title/).fill("Sketch of the Analytical Engine");
    await second.getByLabel(/^author_id/).fill("1");
    await page.getByRole("button", { name: "Insert", exact: true }).click();
    await page.getByRole("cell", { name: "Sketch of the Analytical Engine" }).waitFor();
    const firstRow = page.locator(".grid-row").first();
    await page.getByRole("button", { name: "Sort by title" }).click();
    await firstRow.filter({ hasText: "Notes on the Analytical Engine" }).waitFor();
    await page.getByRole("button", { name: "Sort by title" }).click();
    await firstRow.filter({ hasText: "Sketch of the Analytical Engine" }).waitFor();
    const filter = page.getByRole("form", { name: "Filter rows" });
    await filter.getByLabel("Filter column").selectOption("title");
    await filter.getByLabel("Filter operator").selectOption("ilike");
    await filter.getByLabel("Filter value").fill("*notes*");
    await filter.getByRole("button", { name: "Filter" }).click();
    await page.getByRole("cell", { name: "Sketch of the Analytical Engine" }).waitFor({ state: "detached" });
    await page.getByRole("cell", { name: "Notes on the Analytical Engine" }).waitFor();
    await expect(page.locator(".grid-row").count()).resolves.toBe(1);
    await filter.getByRole("button", { name: "Clear" }).click();
    await page.getByRole("cell", { name: "Sketch of the Analytical Engine" }).click();
    page.once("dialog", (dialog) => void dialog.accept());
    await page.getByRole("button", { name: "Delete row" }).click();
    await page.getByRole("cell", { name: "Sketch of the Analytical Engine" }).waitFor({ state: "detached" });
    expect((await projectSql("select title from public.books")).rows).toEqual([
      { title: "Notes on the Analytical Engine" },
    ]);

    // A row the foreign key refuses: the API's own message, nothing written.
    await page.getByRole("button", { name: "Insert row" }).click();
    await page
      .getByRole("form", { name: "Insert row" })
      .getByLabel(/^author_id/)
      .fill("999");
    await page.getByRole("button", { name: "Insert", exact: true }).click();
    await page.getByRole("alert").filter({ hasText: "foreign key" }).waitFor();
    expect((await projectSql("select count(*)::int as n from public.books")).rows[0].n).toBe(1);
  });

  it("alters the table, enables row level security and writes a policy, each shown as its SQL first", async () => {
    const keys = (await mgmt(server, "GET", `/v1/projects/${ref}/api-keys`)).body;
    const anonKey = keys.find((k: { name: string }) => k.name === "anon").api_key;
    const anonRead = () => atProjectHost(server, ref, "/rest/v1/books?select=title", { apikey: anonKey });

    await page.getByRole("tab", { name: "Structure" }).click();
    const add = page.getByRole("form", { name: "Add column" });
    await add.getByLabel("Column").fill("pages");
    await add.getByLabel("Type").selectOption("integer");
    await add.getByRole("button", { name: "Add column" }).click();
    const pending = page.getByLabel("Change to run");
    await expect(pending.locator("pre").textContent()).resolves.toBe(
      'alter table "public"."books" add column "pages" integer;',
    );
    await pending.getByRole("button", { name: "Run" }).click();
    await page
      .getByRole("table", { name: "Columns" })
      .getByRole("cell", { name: "pages", exact: true })
      .waitFor();
    const added = await projectSql(
      "select data_type from information_schema.columns where table_name = 'books' and column_name = 'pages'",
    );
    expect(added.rows).toEqual([{ data_type: "integer" }]);

    await page.getByRole("button", { name: "Enable RLS" }).click();
    await expect(pending.locator("pre").textContent()).resolves.toBe(
      'alter table "public"."books" enable row level security;',
    );
    await pending.getByRole("button", { name: "Run" }).click();
    await page.getByRole("heading", { name: "Row level security: enabled" }).waitFor();
    expect((await anonRead()).body).toEqual([]);

    const policy = page.getByRole("form", { name: "New policy" });
    await policy.getByLabel("Policy name").fill("anyone reads");
    await policy.getByLabel("Roles").fill("anon");
    await policy.getByRole("button", { name: "Create policy" }).click();
    await expect(pending.locator("pre").textContent()).resolves.toBe(
      'create policy "anyone reads" on "public"."books"\n  for select\n  to "anon"\n  using (true);',
    );
    await pending.getByRole("button", { name: "Run" }).click();
    await page
      .getByRole("table", { name: "Policies" })
      .getByRole("cell", { name: "anyone reads", exact: true })
      .waitFor();
    // Second channel: the catalog, and the REST API as anon.
    const policies = await projectSql("select policyname, cmd from pg_policies where tablename = 'books'");
    expect(policies.rows).toEqual([{ policyname: "anyone reads", cmd: "SELECT" }]);
    expect((await anonRead()).body).toEqual([{ title: "Notes on the Analytical Engine" }]);
    await page.getByRole("tab", { name: "Rows" }).click();
  });

  it("runs SQL with results in a grid, shows errors where they are, and saves a snippet", async () => {
    await page.getByRole("link", { name: "SQL editor" }).click();
    await page.waitForURL(new RegExp(`/project/${ref}/sql/new`));
    const editor = page.locator(".cm-content");
    await editor.click();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.type("select title, author_id from books order by 1");
    await page.keyboard.press("ControlOrMeta+Enter");
    const results = page.getByRole("region", { name: "Results" });
    await results.getByRole("cell", { name: "Notes on the Analytical Engine" }).waitFor();
    await expect(results.textContent()).resolves.toContain("1 row");

    await editor.click();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.type("selec 1");
    await page.getByRole("button", { name: "Run" }).click();
    await page.getByRole("alert").filter({ hasText: "syntax error" }).waitFor();
    await page.getByRole("alert").filter({ hasText: "Error at line 1, column 1" }).waitFor();
    // The history keeps the query that ran.
    await page.getByRole("complementary", { name: "History" }).getByText("select title").waitFor();

    await editor.click();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.type("select count(*) from books");
    await page.getByLabel("Snippet name").fill("Count books");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await page.getByRole("list", { name: "Snippets" }).getByRole("link", { name: "Count books" }).waitFor();
    // Second channel: the spec's snippets endpoints.
    const listed = await mgmt(server, "GET", `/v1/snippets?project_ref=${ref}`);
    expect(listed.body.data.map((s: { name: string }) => s.name)).toEqual(["Count books"]);
    const snippet = await mgmt(server, "GET", `/v1/snippets/${listed.body.data[0].id}`);
    expect(snippet.body.content.sql).toBe("select count(*) from books");
    await page.waitForURL(new RegExp(`/project/${ref}/sql/${listed.body.data[0].id}`));
  });

  it("watches a channel in the realtime inspector: its own broadcast and another client's", async () => {
    await page.getByRole("link", { name: "Realtime" }).click();
    await page.getByRole("heading", { name: "Realtime inspector" }).waitFor();
    await page.getByRole("button", { name: "Join" }).click();
    await page.getByText("Channel: subscribed").waitFor();
    await page.getByLabel("Event").fill("greeting");
    await page.getByRole("button", { name: "Broadcast" }).click();
    await page.getByRole("cell", { name: '{"hello":"world"}' }).waitFor();

    // Another client: the project's broadcast endpoint, with its own key.
    const keys = (await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`)).body;
    const serviceKey = keys.find((k: { name: string }) => k.name === "service_role").api_key;
    const sent = await atProjectHost(server, ref, "/realtime/v1/api/broadcast", {
      apikey: serviceKey,
      body: { messages: [{ topic: "room-1", event: "from-api", payload: { n: 42 } }] },
    });
    expect(sent.status).toBe(202);
    await page.getByRole("cell", { name: "from-api" }).waitFor();
  });

  it("browses storage: a bucket made through the API, a 20 MB upload with progress, an image preview; reveals a key", async () => {
    const keys = (await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`)).body;
    const serviceKey = keys.find((k: { name: string }) => k.name === "service_role").api_key;
    await atProjectHost(server, ref, "/storage/v1/bucket", { apikey: serviceKey, body: { name: "covers" } });
    await page.getByRole("link", { name: "Storage" }).click();
    await page.getByRole("cell", { name: "covers" }).click();
    await page.getByRole("heading", { name: "Bucket covers" }).waitFor();

    // A 20 MB file with a progress bar, then an image with its preview (a private bucket: a signed URL).
    const big = Buffer.alloc(20 * 1024 * 1024, 7);
    await page
      .getByLabel("Upload files")
      .setInputFiles({ name: "big.bin", mimeType: "application/octet-stream", buffer: big });
    await page.getByRole("progressbar", { name: "Upload progress" }).waitFor();
    await page.getByRole("cell", { name: "big.bin" }).waitFor({ timeout: 60_000 });
    await page
      .getByLabel("Upload files")
      .setInputFiles({ name: "dot.png", mimeType: "image/png", buffer: PNG });
    await page.getByRole("cell", { name: "dot.png" }).click();
    const image = page.getByRole("img", { name: "dot.png" });
    await image.waitFor();
    await page.waitForFunction(
      (img) => (img as HTMLImageElement).complete && (img as HTMLImageElement).naturalWidth === 1,
      await image.elementHandle(),
    );
    const stored = await projectSql(
      "select name, (metadata->>'size')::int as size from storage.objects where bucket_id = 'covers' order by name",
    );
    expect(stored.rows).toEqual([
      { name: "big.bin", size: big.length },
      { name: "dot.png", size: PNG.length },
    ]);
    await page.getByRole("link", { name: "API settings" }).click();
    await page.getByRole("heading", { name: "API settings" }).waitFor();
    const masked = page.getByLabel("service_role key");
    await expect(masked.textContent()).resolves.toContain("·");
    await page.getByRole("button", { name: "Reveal" }).click();
    await masked.filter({ hasText: serviceKey }).waitFor();
  });

  it("deploys a function from the editor, invokes it, and sees the request in the logs explorer", async () => {
    await page.getByRole("link", { name: "Edge functions" }).click();
    await page.getByRole("button", { name: "New function" }).click();
    await page.getByRole("form", { name: "New function" }).getByLabel("Slug").fill("hello");
    await page.getByRole("button", { name: "Deploy from template" }).click();
    await page.getByRole("heading", { name: "Function hello" }).waitFor();
    await page.getByText("Deno.serve").waitFor();
    await page.getByRole("button", { name: "Send" }).click();
    const response = page.getByLabel("Response");
    await response.filter({ hasText: '{"hello":"Studio"}' }).waitFor({ timeout: 60_000 });

    // A new version from the editor.
    await page.locator(".cm-content").click();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.type(
      'Deno.serve(() => Response.json({ version: 2 }, { headers: { "Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "authorization, apikey, content-type" } }));',
    );
    await page.getByRole("button", { name: "Deploy", exact: true }).click();
    await page.getByText("version 2").waitFor();
    await page.getByRole("button", { name: "Send" }).click();
    await response.filter({ hasText: '{"version":2}' }).waitFor({ timeout: 60_000 });
    const listed = (await mgmt(server, "GET", `/v1/projects/${ref}/functions`)).body;
    expect(listed.map((f: { slug: string; version: number }) => [f.slug, f.version])).toEqual([["hello", 2]]);

    await page.getByRole("link", { name: "Logs" }).click();
    await page.getByRole("heading", { name: "Logs explorer" }).waitFor();
    await page
      .getByRole("cell", { name: /\/functions\/v1\/hello/ })
      .first()
      .waitFor();
  });

  it("creates an auth user, takes a backup, pauses and restores the project", async () => {
    await page.getByRole("link", { name: "Authentication" }).click();
    await page.getByRole("button", { name: "Add user" }).click();
    const form = page.getByRole("form", { name: "New user" });
    await form.getByLabel("Email").fill("grace@example.com");
    await form.getByLabel("Password").fill("a-long-password-2");
    await form.getByRole("button", { name: "Create user" }).click();
    await page.getByRole("cell", { name: "grace@example.com" }).waitFor();
    expect((await projectSql("select email from auth.users")).rows).toEqual([{ email: "grace@example.com" }]);

    await page.getByRole("link", { name: "Backups" }).click();
    await page.getByRole("button", { name: "Take a backup now" }).click();
    await page.getByRole("cell", { name: "COMPLETED" }).waitFor({ timeout: 60_000 });
    const backups = (await mgmt(server, "GET", `/v1/projects/${ref}/database/backups`)).body.backups;
    expect(backups.map((b: { kind: string; status: string }) => [b.kind, b.status])).toEqual([
      ["manual", "COMPLETED"],
    ]);
    // A restore to a time before any backup: the API's own refusal, and no restore started.
    const restore = page.getByRole("form", { name: "Restore" });
    await restore.getByLabel(/Restore to/).fill("2026-01-01T00:00:00");
    page.once("dialog", (dialog) => void dialog.accept());
    await restore.getByRole("button", { name: "Restore" }).click();
    await restore.getByRole("alert").filter({ hasText: "No completed backup" }).waitFor();
    expect((await mgmt(server, "GET", `/v1/projects/${ref}/database/backups/restores`)).body).toEqual([]);

    await page.getByRole("link", { name: "Project settings" }).click();
    await page.getByRole("button", { name: "Pause" }).click();
    await page.getByRole("button", { name: "Restore" }).waitFor({ timeout: 60_000 });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).body.status).toBe("INACTIVE");
    await page.getByRole("button", { name: "Restore" }).click();
    await page.getByRole("button", { name: "Pause" }).waitFor({ timeout: 120_000 });
    expect((await mgmt(server, "GET", `/v1/projects/${ref}`)).body.status).toBe("ACTIVE_HEALTHY");
  });

  it("signs out, ending the session on the server", async () => {
    const [cookie] = await page.context().cookies();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/sign-in/);
    expect(
      (await server.controlSql("select count(*)::int as n from platform.studio_sessions")).rows[0].n,
    ).toBe(0);
    // The old cookie, replayed, opens nothing.
    const replay = await fetch(`${server.url}/studio/api/v1/projects`, {
      headers: { "x-strata-studio": "1", cookie: `${cookie.name}=${cookie.value}` },
    });
    expect(replay.status).toBe(401);
    await page.goto(`${server.url}/project/${ref}/editor`);
    await page.waitForURL(/\/sign-in\?next=/);
  });
});
