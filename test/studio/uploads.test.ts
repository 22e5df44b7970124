import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import type { Browser, Page, Route } from "playwright-core";
import { withDatabase } from "../../src/db/urls";
import { adminQuery } from "../helpers/db";
import { startTestServer, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { buildStudio, launchChromium, VIEWPORT } from "./browser";

/**
 * Resumable uploads from the storage page: a file above the threshold goes through the project's TUS endpoint
 * in chunks (small ones here, so the file stays small), pauses and resumes, and after the tab is reloaded the
 * same file picked again resumes where the server's copy ends. The server's offset, the stored object's bytes
 * and its storage.objects row are checked through the storage API and SQL.
 */

jest.setTimeout(180_000);

const CHUNK = 64 * 1024;
const SIZE = 10 * CHUNK + 1234;

describe("Studio's resumable uploads", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;
  let file: string;
  const bytes = randomBytes(SIZE);

  /** The chunks the page sends (PATCH), with their offsets; the one numbered `holdAt` waits for `release`. */
  const patches: { offset: number; url: string }[] = [];
  let holdAt = 0;
  let held: ((how: "continue" | "abort") => void) | undefined;
  let holding: Promise<void> = Promise.resolve();
  const hold = (n: number) => {
    holdAt = n;
    holding = new Promise((reached) => {
      onHeld = reached;
    });
  };
  let onHeld: () => void = () => {};

  async function chunks(route: Route) {
    const request = route.request();
    if (request.method() !== "PATCH") return route.continue();
    patches.push({ offset: Number(request.headers()["upload-offset"]), url: request.url() });
    if (patches.length === holdAt) {
      const how = await new Promise<"continue" | "abort">((resolve) => {
        held = resolve;
        onHeld();
      });
      // The page may have aborted the request meanwhile (pause, reload).
      return (how === "abort" ? route.abort() : route.continue()).catch(() => {});
    }
    return route.continue();
  }

  beforeAll(async () => {
    buildStudio();
    server = await startTestServer();
    const made = await fetch(`${server.url}/storage/v1/bucket`, {
      method: "POST",
      headers: {
        apikey: server.serviceKey,
        authorization: `Bearer ${server.serviceKey}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ name: "archive" }),
    });
    expect(made.status).toBe(200);
    file = path.join(testTempDir("studio-upload-"), "big.bin");
    writeFileSync(file, bytes);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: VIEWPORT });
    page.setDefaultTimeout(60_000);
    page.on("pageerror", (e) => console.error("page error:", e));
    // Files above 100 kB go resumably, in 64 kB chunks.
    await page.addInitScript(
      (tuning) => localStorage.setItem("strata.studio.uploads", JSON.stringify(tuning)),
      { resumableAboveBytes: 100_000, chunkBytes: CHUNK },
    );
    await page.route(/\/storage\/v1\/upload\/resumable\//, chunks);
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  /** The server's offset of the upload at `url`, through the storage API's TUS HEAD. */
  async function serverOffset(url: string): Promise<number> {
    const res = await fetch(server.url + new URL(url).pathname, {
      method: "HEAD",
      headers: {
        apikey: server.serviceKey,
        authorization: `Bearer ${server.serviceKey}`,
        "tus-resumable": "1.0.0",
      },
    });
    expect(res.status).toBe(200);
    return Number(res.headers.get("upload-offset"));
  }

  async function projectSql(text: string) {
    const { rows } = await server.controlSql("select database_name from platform.projects where ref = $1", [
      server.ref,
    ]);
    return adminQuery(text, [], withDatabase(server.dbUrl, rows[0].database_name));
  }

  it("pauses and resumes a chunked upload, and resumes it after a reload from the server's offset", async () => {
    await page.goto(`${server.url}/project/${server.ref}/storage/buckets/archive`);
    await page.getByLabel("Access token").fill(server.managementToken);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.getByRole("heading", { name: "Bucket archive" }).waitFor();

    // Paused while its third chunk is on its way: the server holds the two before it.
    hold(3);
    await page.getByLabel("Upload files").setInputFiles(file);
    await page.getByText("Resumable upload").waitFor();
    await holding;
    await page.getByRole("button", { name: "Pause upload" }).click();
    held!("abort");
    await page.getByRole("button", { name: "Resume upload" }).waitFor();
    expect(await serverOffset(patches[2].url)).toBe(2 * CHUNK);
    const progress = page.getByRole("progressbar", { name: "Upload progress" });
    expect(Number(await progress.getAttribute("value"))).toBeGreaterThan(0);

    // Resumed with the button, then the tab reloaded while the sixth chunk is on its way.
    hold(6);
    await page.getByRole("button", { name: "Resume upload" }).click();
    await holding;
    expect(patches.slice(3).map((p) => p.offset)).toEqual([2 * CHUNK, 3 * CHUNK, 4 * CHUNK]);
    await page.reload();
    held!("abort");
    await page.getByRole("heading", { name: "Bucket archive" }).waitFor();
    const offset = await serverOffset(patches[5].url);
    expect(offset).toBe(4 * CHUNK);
    expect((await projectSql("select count(*)::int as n from storage.objects")).rows[0].n).toBe(0);

    // The same file picked again resumes: its first chunk starts at the server's offset.
    await page.getByLabel("Upload files").setInputFiles(file);
    await page.getByText("Resumed an earlier upload of this file").waitFor();
    await page.getByRole("cell", { name: "big.bin" }).waitFor();
    expect(patches[6]).toEqual({ offset, url: patches[5].url });
    expect(patches.at(-1)!.offset).toBe(10 * CHUNK);

    // Second channels: the object through the storage API, and its row.
    const stored = await fetch(`${server.url}/storage/v1/object/archive/big.bin`, {
      headers: { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}` },
    });
    expect(stored.status).toBe(200);
    expect(Buffer.from(await stored.arrayBuffer()).equals(bytes)).toBe(true);
    const rows = await projectSql(
      "select name, (metadata->>'size')::int as size from storage.objects where bucket_id = 'archive'",
    );
    expect(rows.rows).toEqual([{ name: "big.bin", size: SIZE }]);
  });
});
