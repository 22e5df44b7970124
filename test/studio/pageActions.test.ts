import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import type { Browser, Page } from "playwright-core";
import { withDatabase } from "../../src/db/urls";
import { adminQuery } from "../helpers/db";
import { startTestServer, type TestServer } from "../helpers/server";
import { until } from "../helpers/until";
import { buildStudio, launchChromium, VIEWPORT } from "./browser";

/**
 * Studio's actions on one object of a page, each checked through a second channel: banning and unbanning an auth
 * user (auth.users.banned_until by SQL, the user's password sign-in refused), moving and copying a stored object
 * (the storage API and storage.objects), and a function's logs tab (a line the function printed when invoked).
 */

jest.setTimeout(180_000);

describe("Studio's object actions", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let supabase: SupabaseClient;

  beforeAll(async () => {
    buildStudio();
    server = await startTestServer();
    supabase = createClient(server.url, server.serviceKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: VIEWPORT });
    page.setDefaultTimeout(60_000);
    page.on("pageerror", (e) => console.error("page error:", e));
    await page.goto(`${server.url}/projects`);
    await page.getByLabel("Access token").fill(server.managementToken);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.getByRole("heading", { name: "Projects", exact: true }).waitFor();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  async function projectSql(text: string, params: unknown[] = []) {
    const { rows } = await server.controlSql("select database_name from platform.projects where ref = $1", [
      server.ref,
    ]);
    return (await adminQuery(text, params, withDatabase(server.dbUrl, rows[0].database_name))).rows;
  }

  /** The user's password sign-in through the auth API, as an app signs in: its status and error code. */
  async function signIn(email: string, password: string) {
    const res = await fetch(`${server.url}/auth/v1/token?grant_type=password`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ email, password }),
    });
    return { status: res.status, code: ((await res.json()) as { error_code?: string }).error_code };
  }

  it("bans a user for a chosen time and lifts the ban", async () => {
    const password = "a-long-password-1";
    const made = await supabase.auth.admin.createUser({
      email: "feyd@example.test",
      password,
      email_confirm: true,
    });
    if (made.error) throw made.error;
    const id = made.data.user!.id;
    const bannedUntil = async () =>
      (await projectSql("select banned_until from auth.users where id = $1", [id]))[0]
        .banned_until as Date | null;

    await page.goto(`${server.url}/project/${server.ref}/auth/users`);
    await page.getByRole("cell", { name: "feyd@example.test" }).click();
    const selected = page.getByLabel("Selected user");
    await selected.getByLabel("Ban duration").selectOption({ label: "7 days" });
    await selected.getByRole("button", { name: "Ban user" }).click();
    await selected.getByText("Banned until").waitFor();
    await page.getByRole("cell", { name: /^until / }).waitFor();

    const until = await bannedUntil();
    expect(until).not.toBeNull();
    const days = (until!.getTime() - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(6.9);
    expect(days).toBeLessThanOrEqual(7);
    expect(await signIn("feyd@example.test", password)).toEqual({ status: 400, code: "user_banned" });

    await selected.getByRole("button", { name: "Unban user" }).click();
    await selected.getByRole("button", { name: "Ban user" }).waitFor();
    expect(await bannedUntil()).toBeNull();
    expect((await signIn("feyd@example.test", password)).status).toBe(200);
  });

  it("moves and copies an object, and shows the storage API's refusal", async () => {
    for (const [name, isPublic] of [
      ["maps", false],
      ["archive", true],
    ] as const) {
      const made = await supabase.storage.createBucket(name, { public: isPublic });
      if (made.error) throw made.error;
    }
    for (const [path, text] of [
      ["dune.txt", "spice"],
      ["caladan.txt", "water"],
    ]) {
      const up = await supabase.storage.from("maps").upload(path, text, { contentType: "text/plain" });
      if (up.error) throw up.error;
    }
    const objects = async () =>
      (await projectSql("select bucket_id || '/' || name as path from storage.objects order by 1")).map(
        (r) => r.path as string,
      );
    const download = async (bucket: string, path: string) => {
      const { data, error } = await supabase.storage.from(bucket).download(path);
      return error ? null : await data.text();
    };

    // Moved (renamed into a folder) within the bucket: the bytes follow the new name, the old one is gone.
    await page.goto(`${server.url}/project/${server.ref}/storage/buckets/maps`);
    await page.getByRole("cell", { name: "dune.txt" }).click();
    const form = page.getByRole("form", { name: "Move or copy" });
    await form.getByLabel("Destination path").fill("desert/arrakis.txt");
    await form.getByRole("button", { name: "Move" }).click();
    await page.getByRole("cell", { name: "desert" }).waitFor();
    await page.getByRole("cell", { name: "dune.txt" }).waitFor({ state: "detached" });
    expect(await objects()).toEqual(["maps/caladan.txt", "maps/desert/arrakis.txt"]);
    expect(await download("maps", "desert/arrakis.txt")).toBe("spice");
    expect(await download("maps", "dune.txt")).toBeNull();

    // Copied to another bucket: both copies readable, the original still selected.
    await page.getByRole("cell", { name: "caladan.txt" }).click();
    await form.getByLabel("Destination bucket").selectOption("archive");
    await form.getByRole("button", { name: "Copy" }).click();
    await form.getByText("Copied to archive/caladan.txt").waitFor();
    expect(await download("archive", "caladan.txt")).toBe("water");
    expect(await download("maps", "caladan.txt")).toBe("water");

    // A second copy to the same name is refused: the page shows the API's message, nothing changes.
    await form.getByRole("button", { name: "Copy" }).click();
    await form.getByRole("alert").getByText("The resource already exists").waitFor();
    expect(await objects()).toEqual(["archive/caladan.txt", "maps/caladan.txt", "maps/desert/arrakis.txt"]);
  });

  /** A function that prints a line naming its caller and answers the browser's preflight. */
  const printing = (what: string) => `const cors = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Headers": "authorization, apikey, content-type",
  };
  Deno.serve(async (req) => {
    if (req.method === "OPTIONS") return new Response(null, { headers: cors });
    const { name } = await req.json().catch(() => ({ name: "nobody" }));
    console.log("${what} for " + name);
    return Response.json({ ok: true }, { headers: cors });
  });`;

  async function deploy(slug: string, code: string) {
    const res = await fetch(`${server.url}/v1/projects/${server.ref}/functions?slug=${slug}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${server.managementToken}`,
        "content-type": "application/typescript",
      },
      body: code,
    });
    expect(res.status).toBe(201);
  }

  /** The lines function `slug` printed, as platform.function_logs holds them. */
  const printed = async (slug: string) =>
    (
      await server.controlSql(
        "select message from platform.function_logs where project_ref = $1 and slug = $2 and kind = 'console'",
        [server.ref, slug],
      )
    ).rows.map((r) => String(r.message).trim());

  it("shows a function's invocations and printed lines in its logs tab, and no other function's", async () => {
    await deploy("spice-report", printing("spice flows"));
    await deploy("water-report", printing("water of life"));
    // The other function printed first: its line is in the log store before the tab opens.
    const other = await fetch(`${server.url}/functions/v1/water-report`, {
      method: "POST",
      headers: { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}` },
      body: JSON.stringify({ name: "Jessica" }),
    });
    expect(other.status).toBe(200);
    await until(async () => ((await printed("water-report")).length ? true : undefined));

    await page.goto(`${server.url}/project/${server.ref}/functions/spice-report`);
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByLabel("Response").filter({ hasText: '{"ok":true}' }).waitFor();
    await page.getByRole("tab", { name: "Logs" }).click();
    await page.waitForURL(`${server.url}/project/${server.ref}/functions/spice-report/logs`);
    const logs = page.getByLabel("Function logs");
    // The tab refreshes itself until the batch of log rows is written.
    await logs.getByRole("cell", { name: "spice flows for Studio" }).waitFor();
    await logs.getByRole("cell", { name: /^POST \S*spice-report 200$/ }).waitFor();
    expect(await logs.getByText("water of life").count()).toBe(0);
    // Second channel: the line as the log store holds it.
    expect(await printed("spice-report")).toContain("spice flows for Studio");

    // The tab's own path, typed or reloaded, opens the tab.
    await page.reload();
    await logs.getByRole("cell", { name: "spice flows for Studio" }).waitFor();
  });
});
