import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { createApp } from "../../src/server";
import { startTestServer, type TestServer } from "../helpers/server";

/**
 * Studio's calls to the Management API are dispatched in process: a server that listens on a non-loopback
 * address only (nothing at 127.0.0.1:<its port>) still serves the dashboard, and the API counts an unidentified
 * caller by the browser's own address.
 */

const STUDIO = { "x-strata-studio": "1", "content-type": "application/json" };

/** An IPv4 address of this machine that is not loopback, if it has one. */
const ADDRESS = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && !a.internal && a.family === "IPv4")?.address;

(ADDRESS ? describe : describe.skip)("Studio on a server bound to a non-loopback address only", () => {
  let server: TestServer;
  let bound: Server;
  let url: string;
  beforeAll(async () => {
    server = await startTestServer();
    // The installation's app, listening on that one address, and known by its port as `npm start` records it.
    const ctx = server.strata.ctx;
    const { listener, serverOptions } = createApp(ctx);
    bound = createServer(serverOptions, listener);
    await new Promise<void>((resolve) => bound.listen(0, ADDRESS, resolve));
    const { port } = bound.address() as AddressInfo;
    ctx.config = { ...ctx.config, port };
    url = `http://${ADDRESS}:${port}`;
  }, 180_000);
  afterAll(async () => {
    await new Promise((resolve) => bound?.close(resolve));
    await server?.stop();
  });

  it("answers nothing on loopback at its port", async () => {
    const { port } = bound.address() as AddressInfo;
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });

  it("signs in, reads the session's profile and forwards Management API calls", async () => {
    const signIn = await fetch(`${url}/studio/session`, {
      method: "POST",
      headers: STUDIO,
      body: JSON.stringify({ access_token: server.managementToken }),
    });
    expect(signIn.status).toBe(201);
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0];
    const session = await fetch(`${url}/studio/session`, { headers: { ...STUDIO, cookie } });
    expect(session.status).toBe(200);
    expect((await session.json()).profile).toEqual(expect.objectContaining({ username: expect.any(String) }));
    const projects = await fetch(`${url}/studio/api/v1/projects`, { headers: { ...STUDIO, cookie } });
    expect(projects.status).toBe(200);
    expect(projects.headers.get("x-ratelimit-limit")).toMatch(/^\d+$/);
    expect((await projects.json()).map((p: { id: string }) => p.id)).toContain(server.ref);
    // A body goes through as sent: a snippet saved through Studio is the API's.
    const saved = await fetch(`${url}/studio/api/v1/snippets`, {
      method: "POST",
      headers: { ...STUDIO, cookie },
      body: JSON.stringify({ name: "Over the socket pair", project_ref: server.ref, sql: "select 1" }),
    });
    expect(saved.status).toBe(201);
    const { rows } = await server.controlSql("select name from platform.snippets");
    expect(rows).toEqual([{ name: "Over the socket pair" }]);
  });

  it("counts a sign-in with a token the API refuses by the browser's address, in the API's own limiter", async () => {
    const refused = await fetch(`${url}/studio/session`, {
      method: "POST",
      headers: STUDIO,
      body: JSON.stringify({ access_token: "sbp_not_a_token" }),
    });
    expect(refused.status).toBe(401);
    const { rows } = await server.controlSql(
      "select key from platform.rate_limits where key like 'mgmt:ip:%'",
    );
    expect(rows.map((r) => r.key)).toEqual([`mgmt:ip:${ADDRESS}:account`]);
  });
});
