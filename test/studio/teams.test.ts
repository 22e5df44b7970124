import type { Browser, Page } from "playwright-core";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";
import { buildStudio, launchChromium, VIEWPORT } from "./browser";

/**
 * Studio for a user of the installation: an invitation's link opens Studio's join page, the invitee sets a
 * password, signs in with email and password, works as a member, and signing out ends the API session too.
 */

jest.setTimeout(180_000);

describe("Studio's email and password sign-in", () => {
  let server: TestServer;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    buildStudio();
    server = await startTestServer();
    browser = await launchChromium();
    page = await browser.newPage({ viewport: VIEWPORT });
    page.setDefaultTimeout(60_000);
    page.on("pageerror", (e) => console.error("page error:", e));
  });
  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  const sessionsOf = async (email: string) =>
    (
      await server.controlSql(
        "select count(*)::int as n from platform.user_sessions s join platform.users u on u.id = s.user_id where u.email = $1",
        [email],
      )
    ).rows[0].n;

  it("invites from the organization page; the invitee joins through the link, signs in with a password, signs out of the API as well, and is made read-only", async () => {
    // The administrator invites from the organization's page (signed in with the installation's token).
    await page.goto(`${server.url}/org/default-org`);
    await page.getByLabel("Access token").fill(server.managementToken);
    await page.getByRole("button", { name: "Sign in with token" }).click();
    const invite = page.getByRole("form", { name: "Invite a member" });
    await invite.getByLabel("Email").fill("ada@example.test");
    await invite.getByLabel("Role").selectOption("Developer");
    await invite.getByRole("button", { name: "Invite" }).click();
    // Without a mail server the answer carries the link, which the page shows: its query, on this server.
    const shown = await invite.locator("code").textContent();
    const link = new URL(shown!);
    const pending = (await mgmt(server, "GET", "/v1/organizations/default-org/members/invitations")).body;
    expect(pending.map((i: { email: string }) => i.email)).toEqual(["ada@example.test"]);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/sign-in/);

    await page.goto(`${server.url}/join${link.search}`);
    await page.getByRole("heading", { name: "Join default-org" }).waitFor();
    await page.getByLabel("Password").fill("a-strong-password-1");
    await page.getByRole("button", { name: "Accept invitation" }).click();

    await page.waitForURL(/\/sign-in\?email=ada/);
    await page.getByText("You joined Default Organization").waitFor();
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.getByRole("alert").filter({ hasText: "Invalid login credentials" }).waitFor();
    expect(await page.context().cookies()).toEqual([]);

    await page.getByLabel("Password").fill("a-strong-password-1");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL(/\/projects$/);
    await page.getByText("Default Project").waitFor();
    expect(await sessionsOf("ada@example.test")).toBe(1);
    // Second channel: the member list of the organization.
    const members = (await mgmt(server, "GET", "/v1/organizations/default-org/members")).body;
    expect(members).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ email: "ada@example.test", role_name: "Developer" }),
      ]),
    );

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(/\/sign-in/);
    expect(await sessionsOf("ada@example.test")).toBe(0);
    expect(
      (await server.controlSql("select count(*)::int as n from platform.studio_sessions")).rows[0].n,
    ).toBe(0);
  });
});
