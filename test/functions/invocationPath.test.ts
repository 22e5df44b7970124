import http from "node:http";
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

/** A node on the test's database, invoking what the first one deploys. */
function startNode(log: pino.Logger, env: Record<string, string> = {}) {
  return startStrata(
    loadConfig({
      DATABASE_URL: server.dbUrl,
      PORT: "0",
      JWT_SECRET: TEST_JWT_SECRET,
      AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
      STRATA_KEK: TEST_KEK,
      STRATA_DATA_DIR: testTempDir("strata-functions-path-"),
      ...env,
    }),
    log,
  );
}

beforeAll(async () => {
  server = await startTestServer();
  const log = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  second = await startNode(pino({ level: "debug" }, log));
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
      "    url: req.url,",
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
    url: `http://127.0.0.1:${second.port}/headers`,
  });
  expect(res.headers.get("x-custom")).toBe("yes");
  expect(res.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
  expect(res.headers.get("content-security-policy")).toBe("sandbox");

  // A Host that is more than a name and port: the function still sees the URL the client called.
  const odd = await new Promise<{ status?: number; text: string }>((resolve, reject) => {
    const sent = http.request(`${base}/headers?q=1`, {
      headers: { ...bearer(), host: "user@127.0.0.1" },
    });
    sent.on("response", (r) => {
      let text = "";
      r.on("data", (c) => (text += c));
      r.on("end", () => resolve({ status: r.statusCode, text }));
    });
    sent.on("error", reject);
    sent.end();
  });
  expect(odd.status).toBe(200);
  expect(JSON.parse(odd.text)).toMatchObject({
    host: "user@127.0.0.1",
    url: "http://user@127.0.0.1/headers?q=1",
  });
});

/** Reads a body until `text` has come (or the body ends): what was read. */
async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, text: string): Promise<string> {
  const decoder = new TextDecoder();
  let read = "";
  while (!read.includes(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    read += decoder.decode(value, { stream: true });
  }
  return read;
}

/** Polls the function's `/state` until `ready` says its answer is the one awaited. */
async function stateOf<T>(url: string, ready: (state: T) => boolean): Promise<T> {
  for (;;) {
    const state = (await (await fetch(url, { headers: bearer() })).json()) as T;
    if (ready(state)) return state;
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("ends the client's answer when the worker dies in the middle of it, and serves the next call", async () => {
  await deploy(
    "dies",
    [
      "Deno.serve((req) => {",
      "  if (new URL(req.url).searchParams.has('fine')) return new Response('fine')",
      "  const body = new ReadableStream({",
      "    start(c) {",
      "      c.enqueue(new TextEncoder().encode('first;'))",
      "      setTimeout(() => Deno.exit(1), 100)",
      "    },",
      "  })",
      "  return new Response(body)",
      "})",
    ].join("\n"),
  );
  const res = await fetch(`${base}/dies`, { headers: bearer() });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  expect(await readUntil(reader, "first;")).toBe("first;");
  // The answer breaks off: no clean end that would pass a truncated answer for a whole one.
  await expect(readUntil(reader, "never sent")).rejects.toThrow();
  // Once the pool has seen the worker's end, a new worker serves.
  let next = await fetch(`${base}/dies?fine`, { headers: bearer() });
  for (let i = 0; i < 20 && next.status !== 200; i++)
    next = await fetch(`${base}/dies?fine`, { headers: bearer() });
  expect(next.status).toBe(200);
  expect(await next.text()).toBe("fine");
});

it("stops the function's side of a request when the client goes away in the middle of the answer", async () => {
  await deploy(
    "endless",
    [
      "let cancelled = 0",
      "Deno.serve((req) => {",
      "  if (new URL(req.url).pathname.endsWith('/state')) return Response.json({ cancelled })",
      "  let timer: number",
      "  const body = new ReadableStream({",
      "    start(c) { timer = setInterval(() => c.enqueue(new TextEncoder().encode('tick;')), 20) },",
      "    cancel() { clearInterval(timer); cancelled++ },",
      "  })",
      "  return new Response(body)",
      "})",
    ].join("\n"),
  );
  const aborter = new AbortController();
  const res = await fetch(`${base}/endless`, { headers: bearer(), signal: aborter.signal });
  const reader = res.body!.getReader();
  expect(await readUntil(reader, "tick;tick;")).toContain("tick;tick;");
  aborter.abort();
  // Seen from the function: its answer's stream was cancelled (the worker's connection closed).
  expect(await stateOf<{ cancelled: number }>(`${base}/endless/state`, (s) => s.cancelled > 0)).toEqual({
    cancelled: 1,
  });
});

it("passes a 1 MB body with its length, answers a function that does not read one, and takes Expect: 100-continue", async () => {
  await deploy(
    "bodies",
    [
      "Deno.serve(async (req) => {",
      "  if (new URL(req.url).searchParams.has('refuse')) return Response.json({ refused: true }, { status: 413 })",
      "  const bytes = new Uint8Array(await req.arrayBuffer())",
      "  return Response.json({ bytes: bytes.length, length: req.headers.get('content-length'), last: bytes[bytes.length - 1] })",
      "})",
    ].join("\n"),
  );
  const body = new Uint8Array(1024 * 1024).fill(98);
  const posted = await fetch(`${base}/bodies`, { method: "POST", headers: bearer(), body });
  expect(await posted.json()).toEqual({ bytes: 1024 * 1024, length: String(1024 * 1024), last: 98 });

  const refused = await fetch(`${base}/bodies?refuse`, { method: "POST", headers: bearer(), body });
  expect(refused.status).toBe(413);
  expect(await refused.json()).toEqual({ refused: true });

  // A client that waits for 100 Continue before its body (curl does for large uploads).
  const answer = await new Promise<{ status?: number; text: string }>((resolve, reject) => {
    const sent = http.request(`${base}/bodies`, {
      method: "POST",
      headers: { ...bearer(), expect: "100-continue", "content-length": "5" },
    });
    sent.on("continue", () => sent.end("hello"));
    sent.on("response", (r) => {
      let text = "";
      r.on("data", (c) => (text += c));
      r.on("end", () => resolve({ status: r.statusCode, text }));
    });
    sent.on("error", reject);
  });
  expect(answer.status).toBe(200);
  expect(JSON.parse(answer.text)).toEqual({ bytes: 5, length: "5", last: 111 });
});

it("answers 504 IDLE_TIMEOUT at the request time limit and ends an answer still going then", async () => {
  const node = await startNode(pino({ level: "silent" }), { FUNCTIONS_WALL_MS: "1500" });
  try {
    await deploy(
      "slow",
      [
        "Deno.serve((req) => {",
        "  if (new URL(req.url).searchParams.has('silent')) return new Promise(() => {})",
        "  const body = new ReadableStream({",
        "    start(c) {",
        "      c.enqueue(new TextEncoder().encode('first;'))",
        "      setInterval(() => c.enqueue(new TextEncoder().encode('more;')), 200)",
        "    },",
        "  })",
        "  return new Response(body)",
        "})",
      ].join("\n"),
    );
    const slow = `http://127.0.0.1:${node.port}/functions/v1/slow`;
    const silent = await fetch(`${slow}?silent`, { headers: bearer() });
    expect(silent.status).toBe(504);
    expect(silent.headers.get("sb-error-code")).toBe("IDLE_TIMEOUT");
    expect(await silent.json()).toEqual({
      code: "IDLE_TIMEOUT",
      message: "Function did not answer within the request time limit",
    });
    const going = await fetch(slow, { headers: bearer() });
    expect(going.status).toBe(200);
    await expect(going.text()).rejects.toThrow();
  } finally {
    await node.stop();
  }
});
