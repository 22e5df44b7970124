import http from "node:http";
import { mgmt } from "../management/client";
import { startTestServer, type TestServer } from "../helpers/server";
import { buildStudio } from "./browser";

/** Studio's server side over plain HTTP: its pages, its session cookie, and the forwarder's guards. */

const STUDIO = { "x-strata-studio": "1" };

describe("Studio's session and forwarder", () => {
  let server: TestServer;
  beforeAll(async () => {
    buildStudio();
    server = await startTestServer();
  }, 180_000);
  afterAll(() => server.stop());

  const signIn = (headers: Record<string, string>, token = server.managementToken) =>
    fetch(`${server.url}/studio/session`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ access_token: token }),
    });

  /** A GET at the project's own host (`<ref>.localhost`): status and headers. */
  const atProjectHost = (path: string) =>
    new Promise<http.IncomingMessage>((resolve, reject) => {
      const { hostname, port } = new URL(server.url);
      http
        .get({ host: hostname, port, path, headers: { host: `${server.ref}.localhost` } }, (res) => {
          res.resume();
          resolve(res);
        })
        .on("error", reject);
    });

  const cookieOf = (res: Response) => res.headers.get("set-cookie")!.split(";")[0];

  it("serves the page at the platform's paths, not at API paths or a project's host", async () => {
    for (const path of [
      "/projects",
      `/project/${server.ref}/editor`,
      `/project/${server.ref}/sql/new`,
      "/org/default-org",
    ]) {
      const res = await fetch(server.url + path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/text\/html/);
      expect(res.headers.get("content-security-policy")).toMatch(/frame-ancestors 'none'/);
      expect(await res.text()).toMatch(/<div id="root">/);
    }
    // The APIs keep their paths.
    expect((await mgmt(server, "GET", "/v1/projects")).status).toBe(200);
    const rest = await fetch(`${server.url}/rest/v1/`, { headers: { apikey: server.anonKey } });
    expect(rest.headers.get("content-type")).toMatch(/openapi|json/);
    // A project's own host serves its APIs only.
    expect((await atProjectHost("/projects")).statusCode).toBe(404);
  });

  it("signs in with a token into an HttpOnly cookie, stores no token, and signs out for good", async () => {
    const res = await signIn(STUDIO);
    expect(res.status).toBe(201);
    const setCookie = res.headers.get("set-cookie")!;
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    const cookie = cookieOf(res);
    // Second channel: the control plane holds a hash and a key, never the token.
    const { rows } = await server.controlSql("select * from platform.studio_sessions");
    expect(rows).toHaveLength(1);
    expect(JSON.stringify(rows)).not.toContain(server.managementToken);

    const projects = await fetch(`${server.url}/studio/api/v1/projects`, { headers: { ...STUDIO, cookie } });
    expect(projects.status).toBe(200);
    expect((await projects.json()).map((p: { ref: string }) => p.ref)).toContain(server.ref);

    const out = await fetch(`${server.url}/studio/session`, {
      method: "DELETE",
      headers: { ...STUDIO, cookie },
    });
    expect(out.status).toBe(204);
    expect((await server.controlSql("select * from platform.studio_sessions")).rows).toHaveLength(0);
    const after = await fetch(`${server.url}/studio/api/v1/projects`, { headers: { ...STUDIO, cookie } });
    expect(after.status).toBe(401);
  });

  it("refuses a bad token, and calls without Studio's header or from another origin", async () => {
    expect((await signIn(STUDIO, "sbp_" + "0".repeat(40))).status).toBe(401);
    expect((await signIn({})).status).toBe(403);
    expect((await signIn({ ...STUDIO, origin: "http://evil.example" })).status).toBe(403);
    expect((await server.controlSql("select * from platform.studio_sessions")).rows).toHaveLength(0);

    const cookie = cookieOf(await signIn(STUDIO));
    const withoutHeader = await fetch(`${server.url}/studio/api/v1/projects`, { headers: { cookie } });
    expect(withoutHeader.status).toBe(403);
    const crossOrigin = await fetch(`${server.url}/studio/api/v1/projects`, {
      method: "POST",
      headers: { ...STUDIO, cookie, origin: "http://evil.example", "content-type": "application/json" },
      body: JSON.stringify({ name: "x", organization_slug: "default-org", db_pass: "pw" }),
    });
    expect(crossOrigin.status).toBe(403);
    expect((await server.controlSql("select count(*)::int as n from platform.projects")).rows[0].n).toBe(1);
    // A forged cookie (the id of a real session, another sealed token) opens nothing.
    const forged = cookie.replace(/\.[^.]+$/, "." + "A".repeat(60));
    expect(
      (await fetch(`${server.url}/studio/api/v1/projects`, { headers: { ...STUDIO, cookie: forged } }))
        .status,
    ).toBe(401);
    // Only the Management API is forwarded, by paths written as they are.
    for (const path of [
      "/health",
      "/v1/../health",
      "/v1/%2e%2e/%2e%2e/rest/v1/",
      "/v1/..%2f..%2fhealth",
      "//v1/projects",
    ]) {
      const elsewhere = await fetch(`${server.url}/studio/api${path}`, { headers: { ...STUDIO, cookie } });
      expect(elsewhere.status).toBe(404);
    }
  });
});
