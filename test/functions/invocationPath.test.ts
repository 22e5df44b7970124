import { Writable } from "node:stream";
import pino from "pino";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { startTestServer, TEST_JWT_SECRET, TEST_KEK, type TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

/**
 * What the invocation path (functions served ahead of Express) must keep: the request line, preflights that
 * reach the function, streamed bodies both ways, the function's headers as it sent them, and the platform's
 * error shapes. Functions are deployed through one node and invoked on a second whose log is read here.
 */

let server: TestServer;
let second: RunningStrata;
let base: string;
const lines: string[] = [];

beforeAll(async () => {
  server = await startTestServer();
  const log = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  second = await startStrata(
    loadConfig({
      DATABASE_URL: server.dbUrl,
      PORT: "0",
      JWT_SECRET: TEST_JWT_SECRET,
      AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
      STRATA_KEK: TEST_KEK,
      STRATA_DATA_DIR: testTempDir("strata-functions-path-"),
    }),
    pino({ level: "debug" }, log),
  );
  base = `http://127.0.0.1:${second.port}/functions/v1`;
});
afterAll(async () => {
  await second?.stop();
  await server?.stop();
});

async function deploy(slug: string, source: string) {
  const form = new FormData();
  form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: slug }));
  form.append("file", new Blob([source]), "index.ts");
  const res = await fetch(`${server.url}/v1/projects/${server.ref}/functions/deploy?slug=${slug}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.managementToken}` },
    body: form,
  });
  expect(res.status).toBe(201);
}

const bearer = () => ({ authorization: `Bearer ${server.anonKey}` });

it("writes one request line per invocation, with its path only: no query, no credentials", async () => {
  await deploy(
    "lined",
    "Deno.serve((req) => Response.json({ path: new URL(req.url).pathname, search: new URL(req.url).search }))",
  );
  const res = await fetch(`${base}/lined/sub/path?apikey=query-secret-value&x=1`, {
    headers: { ...bearer(), apikey: server.anonKey },
  });
  expect(res.status).toBe(200);
  // The function still sees its path and query.
  expect(await res.json()).toEqual({ path: "/lined/sub/path", search: "?apikey=query-secret-value&x=1" });

  let requestLines: { req: unknown; res: unknown }[] = [];
  for (let i = 0; i < 100 && requestLines.length === 0; i++) {
    requestLines = lines
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === "request" && l.req?.path?.startsWith("/functions/v1/lined"));
    if (!requestLines.length) await new Promise((r) => setTimeout(r, 50));
  }
  expect(requestLines).toEqual([
    expect.objectContaining({
      req: { method: "GET", path: "/functions/v1/lined/sub/path" },
      res: { status: 200 },
    }),
  ]);
  const written = lines.join("\n");
  expect(written).not.toContain("query-secret-value");
  expect(written).not.toContain(server.anonKey);
});

it("passes a CORS preflight to the function without a JWT, and refuses other calls in the platform's shapes", async () => {
  await deploy(
    "cors",
    [
      "const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization, x-client-info, apikey, content-type' }",
      "Deno.serve((req) => req.method === 'OPTIONS' ? new Response('ok', { headers: cors }) : Response.json({ ok: true }, { headers: cors }))",
    ].join("\n"),
  );
  const preflight = await fetch(`${base}/cors`, {
    method: "OPTIONS",
    headers: { origin: "https://app.example.invalid", "access-control-request-method": "POST" },
  });
  expect(preflight.status).toBe(200);
  expect(preflight.headers.get("access-control-allow-origin")).toBe("*");
  expect(await preflight.text()).toBe("ok");

  const forged = await fetch(`${base}/cors`, {
    method: "POST",
    headers: { authorization: "Bearer not-a-jwt", origin: "https://app.example.invalid" },
    body: "{}",
  });
  expect(forged.status).toBe(401);
  expect(forged.headers.get("content-type")).toMatch(/^application\/json/);
  expect(await forged.json()).toEqual({ code: 401, message: "Invalid JWT" });

  const missing = await fetch(`${base}/no-such-function`, { headers: bearer() });
  expect(missing.status).toBe(404);
  expect(missing.headers.get("sb-error-code")).toBe("NOT_FOUND");
  expect(await missing.json()).toEqual({ code: "NOT_FOUND", message: "Requested function was not found" });
});

it("streams the function's answer as it comes and the request's body to the function", async () => {
  await deploy(
    "stream",
    [
      "let release: () => void",
      "const released = new Promise<void>((r) => (release = r))",
      "Deno.serve(async (req) => {",
      "  const path = new URL(req.url).pathname",
      "  if (path.endsWith('/release')) { release(); return new Response('released') }",
      "  if (req.method === 'POST') {",
      "    let bytes = 0",
      "    for await (const chunk of req.body!) bytes += chunk.length",
      "    return Response.json({ bytes })",
      "  }",
      "  const body = new ReadableStream({",
      "    async start(c) {",
      "      c.enqueue(new TextEncoder().encode('first;'))",
      "      await released",
      "      c.enqueue(new TextEncoder().encode('second'))",
      "      c.close()",
      "    },",
      "  })",
      "  return new Response(body, { headers: { 'content-type': 'text/plain' } })",
      "})",
    ].join("\n"),
  );
  // The first part arrives while the function still holds its answer open: nothing waits for its end.
  const res = await fetch(`${base}/stream`, { headers: bearer() });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("first;")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  expect(text).toBe("first;");
  const release = await fetch(`${base}/stream/release`, { headers: bearer() });
  expect(await release.text()).toBe("released");
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  expect(text).toBe("first;second");

  // A request body sent in chunks of unknown total length reaches the function whole.
  const chunk = new Uint8Array(64 * 1024).fill(97);
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent === 16) return c.close();
      sent++;
      c.enqueue(chunk);
    },
  });
  const posted = await fetch(`${base}/stream`, {
    method: "POST",
    headers: bearer(),
    body,
    duplex: "half",
  } as RequestInit);
  expect(await posted.json()).toEqual({ bytes: 16 * 64 * 1024 });
});

it("gives the function the caller's address and headers, and the caller the function's headers as sent", async () => {
  await deploy(
    "headers",
    [
      "Deno.serve((req) => {",
      "  const h = new Headers({ 'x-custom': 'yes', 'content-type': 'application/json' })",
      "  h.append('set-cookie', 'a=1')",
      "  h.append('set-cookie', 'b=2')",
      "  return new Response(JSON.stringify({",
      "    forwardedFor: req.headers.get('x-forwarded-for'),",
      "    forwardedProto: req.headers.get('x-forwarded-proto'),",
      "    custom: req.headers.get('x-caller'),",
      "    host: req.headers.get('host'),",
      "  }), { headers: h })",
      "})",
    ].join("\n"),
  );
  const res = await fetch(`${base}/headers`, {
    // Without a trusted proxy, a caller's own X-Forwarded-* are not what the function is told.
    headers: {
      ...bearer(),
      "x-caller": "caller-value",
      "x-forwarded-for": "203.0.113.9",
      "x-forwarded-proto": "https",
    },
  });
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({
    // One address, the connection's own (the server listens on both stacks).
    forwardedFor: expect.stringMatching(/^(::ffff:)?127\.0\.0\.1$/),
    forwardedProto: "http",
    custom: "caller-value",
    host: `127.0.0.1:${second.port}`,
  });
  expect(res.headers.get("x-custom")).toBe("yes");
  expect(res.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
  expect(res.headers.get("content-security-policy")).toBe("sandbox");
});
