import { mkdirSync } from "node:fs";
import path from "node:path";
import type { Browser } from "playwright-core";
import { startTestServer, type TestServer } from "../helpers/server";
import { buildStudio, launchChromium, VIEWPORT } from "./browser";
import { projectPages, seedProject, visit } from "./pages";

/**
 * `npm run screenshots`: each page of Studio at 1440×900 into docs/screenshots/ (STUDIO_SCREENSHOTS names the
 * folder; without it, as in the test suite, this file does nothing).
 */
const target = process.env.STUDIO_SCREENSHOTS;
const maybe = target ? describe : describe.skip;

jest.setTimeout(240_000);

maybe("Studio's screenshots", () => {
  let server: TestServer;
  let browser: Browser;
  beforeAll(async () => {
    buildStudio();
    server = await startTestServer();
    await seedProject(server, server.ref);
    browser = await launchChromium();
    mkdirSync(path.resolve(target!), { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("takes one of each page", async () => {
    const page = await browser.newPage({ viewport: VIEWPORT });
    const shoot = (name: string) => page.screenshot({ path: path.resolve(target!, `${name}.png`) });
    await page.goto(`${server.url}/sign-in`);
    await page.getByRole("button", { name: "Sign in with token" }).waitFor();
    await shoot("sign-in");
    await page.getByLabel("Access token").fill(server.managementToken);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    await page.waitForURL(/\/projects$/);
    await page.getByText("Default Project").waitFor();
    await shoot("projects");
    await visit(page, `${server.url}/org/default-org`, "Default Organization");
    await shoot("organization");
    for (const [name, pagePath, heading, shows] of projectPages(server.ref)) {
      await visit(page, server.url + pagePath, heading, shows);
      if (name === "sql-editor") {
        await page.locator(".cm-content").click();
        await page.keyboard.press("ControlOrMeta+A");
        await page.keyboard.type("select name, born, tags from authors order by born");
        await page.keyboard.press("ControlOrMeta+Enter");
        await page.getByRole("cell", { name: "Ada Lovelace" }).waitFor();
        await page.keyboard.press("Escape");
      }
      if (name === "graphiql") {
        await page.locator(".graphiql-query-editor .monaco-editor").first().click();
        await page.keyboard.press("ControlOrMeta+A");
        await page.keyboard.press("Delete");
        await page.keyboard.insertText("{ authorsCollection(first: 3) { edges { node { name born } } } }");
        await page.keyboard.press("ControlOrMeta+Enter");
        await page.locator(".graphiql-response").filter({ hasText: "Ada Lovelace" }).waitFor();
      }
      await shoot(name);
    }
  });
});
