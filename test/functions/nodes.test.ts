import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { startTestServer, TEST_JWT_SECRET, TEST_KEK, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";
import { mgmt } from "../management/client";

/**
 * Two nodes of one installation: each keeps the deployed functions and secrets it served, and a deploy, an
 * update, a delete or a secret's change made through the other node applies at its next invocation.
 */

let server: TestServer;
let second: RunningStrata;
const SOURCE = "Deno.serve(() => Response.json({ v: VERSION, secret: Deno.env.get('SHARED') ?? null }))";

beforeAll(async () => {
  server = await startTestServer();
  second = await startStrata(
    loadConfig({
      DATABASE_URL: server.dbUrl,
      PORT: "0",
      JWT_SECRET: TEST_JWT_SECRET,
      AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
      STRATA_KEK: TEST_KEK,
      STRATA_DATA_DIR: testTempDir("strata-functions-node2-"),
    }),
    createLogger("silent"),
  );
});
afterAll(async () => {
  await second?.stop();
  await server?.stop();
});

async function deploy(slug: string, version: number, metadata: Record<string, unknown> = {}) {
  const form = new FormData();
  form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: slug, ...metadata }));
  form.append("file", new Blob([SOURCE.replace("VERSION", String(version))]), "index.ts");
  const res = await fetch(`${server.url}/v1/projects/${server.ref}/functions/deploy?slug=${slug}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.managementToken}` },
    body: form,
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string; version: number };
}

/** An invocation on the second node: its status and body. */
async function invokeOnSecond(slug: string, authorized = true) {
  const res = await fetch(`http://127.0.0.1:${second.port}/functions/v1/${slug}`, {
    headers: authorized ? { authorization: `Bearer ${server.anonKey}` } : {},
  });
  return { status: res.status, body: await res.text() };
}

/** Invokes on the second node until it answers `expected` (a change reaches it by notification). */
async function untilSecondAnswers(
  slug: string,
  expected: { status: number; body?: unknown },
  authorized = true,
) {
  let last: { status: number; body: string } | undefined;
  for (let i = 0; i < 200; i++) {
    last = await invokeOnSecond(slug, authorized);
    const matches =
      last.status === expected.status &&
      (expected.body === undefined ||
        JSON.stringify(JSON.parse(last.body)) === JSON.stringify(expected.body));
    if (matches) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`the second node still answers ${JSON.stringify(last)}, not ${JSON.stringify(expected)}`);
}

it("applies a redeploy, a secret's change, a bulk update and a delete made on one node on the other", async () => {
  const secretsPath = `/v1/projects/${server.ref}/secrets`;
  expect((await mgmt(server, "POST", secretsPath, { body: [{ name: "SHARED", value: "one" }] })).status).toBe(
    201,
  );
  const first = await deploy("shared", 1);
  // Served (and kept) by the second node.
  await untilSecondAnswers("shared", { status: 200, body: { v: 1, secret: "one" } });
  expect(await invokeOnSecond("shared")).toMatchObject({ status: 200 });

  // A secret's new value.
  expect((await mgmt(server, "POST", secretsPath, { body: [{ name: "SHARED", value: "two" }] })).status).toBe(
    201,
  );
  await untilSecondAnswers("shared", { status: 200, body: { v: 1, secret: "two" } });

  // A redeploy, open to callers without a JWT.
  await deploy("shared", 2, { verify_jwt: false });
  await untilSecondAnswers("shared", { status: 200, body: { v: 2, secret: "two" } }, false);

  // A bulk update that asks for a JWT again: the second node refuses a call without one.
  const update = await mgmt(server, "PUT", `/v1/projects/${server.ref}/functions`, {
    body: [{ id: first.id, slug: "shared", name: "shared", status: "ACTIVE", version: 2, verify_jwt: true }],
  });
  expect(update.status).toBe(200);
  await untilSecondAnswers("shared", { status: 401 }, false);
  const stored = await server.controlSql(
    "select verify_jwt from platform.edge_functions where project_ref = $1 and slug = 'shared'",
    [server.ref],
  );
  expect(stored.rows).toEqual([{ verify_jwt: true }]);

  // A deleted secret.
  expect((await mgmt(server, "DELETE", secretsPath, { body: ["SHARED"] })).status).toBe(200);
  await untilSecondAnswers("shared", { status: 200, body: { v: 2, secret: null } });

  // A deleted function.
  expect((await mgmt(server, "DELETE", `/v1/projects/${server.ref}/functions/shared`)).status).toBe(200);
  await untilSecondAnswers("shared", { status: 404 });
});
