import { existsSync, readdirSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt, waitForStatus } from "../management/client";

/** A request to a project's own host (`<ref>.localhost`), sent to the test server's address. */
function atHost(
  server: TestServer,
  ref: string,
  method: string,
  urlPath: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; text: string }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: urlPath,
        headers: { host: `${ref}.localhost`, ...headers },
      },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Stores one object in `bucket` of project `ref` through its storage API. */
async function storeObject(server: TestServer, ref: string, key: string, bucket: string, name: string) {
  const auth = { apikey: key, authorization: `Bearer ${key}` };
  const made = await atHost(
    server,
    ref,
    "POST",
    "/storage/v1/bucket",
    { ...auth, "content-type": "application/json" },
    JSON.stringify({ name: bucket }),
  );
  expect(made.status).toBe(200);
  const put = await atHost(
    server,
    ref,
    "POST",
    `/storage/v1/object/${bucket}/${name}`,
    { ...auth, "content-type": "text/plain" },
    `bytes of ${ref}`,
  );
  expect(put.status).toBe(200);
}

describe("Deleting a project", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("removes its database, roles, secrets and stored files, and nothing of another project", async () => {
    const created = await mgmt(server, "POST", "/v1/projects", {
      body: { name: "doomed", organization_slug: "default-org", db_pass: "doomed-password-1" },
    });
    expect(created.status).toBe(201);
    const ref = created.body.ref as string;
    await waitForStatus(server, ref, "ACTIVE_HEALTHY");
    const keys = await mgmt(server, "GET", `/v1/projects/${ref}/api-keys?reveal=true`);
    const serviceKey = (keys.body as { name: string; api_key: string }[]).find(
      (k) => k.name === "service_role",
    )!.api_key;
    expect(
      (
        await mgmt(server, "POST", `/v1/projects/${ref}/secrets`, {
          body: [{ name: "DOOMED_KEY", value: "v" }],
        })
      ).status,
    ).toBe(201);
    await storeObject(server, ref, serviceKey, "files", "a.txt");
    await storeObject(server, server.ref, server.serviceKey, "kept", "b.txt");
    const database = (
      await server.controlSql("select database_name from platform.projects where ref = $1", [ref])
    ).rows[0].database_name as string;
    const storageRoot = path.join(server.strata.ctx.config.dataDir, "storage");
    expect(readdirSync(storageRoot).sort()).toEqual([ref, server.ref].sort());
    const logEvents = async (project: string) =>
      (
        await server.controlSql("select count(*)::int as n from platform.log_events where project_ref = $1", [
          project,
        ])
      ).rows[0].n as number;
    // The storage requests' edge-log events are written within a second.
    for (let i = 0; i < 50 && (await logEvents(ref)) === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await logEvents(ref)).toBeGreaterThan(0);

    expect((await mgmt(server, "DELETE", `/v1/projects/${ref}`)).status).toBe(200);

    // Second channels: the cluster's catalog, the control database, the disk.
    expect((await server.sql("select 1 from pg_database where datname = $1", [database])).rowCount).toBe(0);
    expect(
      (await server.sql("select rolname from pg_roles where rolname like '%' || $1 || '%'", [ref])).rows,
    ).toEqual([]);
    expect(
      (await server.controlSql("select 1 from platform.project_secrets where project_ref = $1", [ref]))
        .rowCount,
    ).toBe(0);
    expect(existsSync(path.join(storageRoot, ref))).toBe(false);
    expect(await logEvents(ref)).toBe(0);
    // The default project keeps its object.
    const kept = await atHost(server, server.ref, "GET", "/storage/v1/object/kept/b.txt", {
      apikey: server.serviceKey,
      authorization: `Bearer ${server.serviceKey}`,
    });
    expect(kept).toEqual({ status: 200, text: `bytes of ${server.ref}` });
  });
});
