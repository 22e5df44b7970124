import http from "node:http";
import { startTestServer, type TestServer } from "../helpers/server";

/**
 * /auth/v1 reads at most 1 MiB of a body, as the platform's auth server does (http.MaxBytesReader of 1 MB in
 * its route table): more answers 413 in its error shape, on every route family, before anything happens.
 */

const LIMIT = 1 << 20;
const TOO_LARGE = {
  code: 413,
  error_code: "request_entity_too_large",
  msg: `Request body too large (max ${LIMIT} bytes)`,
};

interface Answer {
  status: number;
  body: any;
  connection: string | undefined;
}

/**
 * Sends `size` bytes of body (a JSON object padded to that size, or `filler` bytes of another type) with a
 * Content-Length, or chunked without one.
 */
function send(
  server: TestServer,
  method: string,
  path: string,
  options: { size: number; type?: string; chunked?: boolean; headers?: Record<string, string> },
): Promise<Answer> {
  const type = options.type ?? "application/json";
  const prefix = type === "application/json" ? '{"email":"a@example.com","pad":"' : "";
  const suffix = type === "application/json" ? '"}' : "";
  const body = Buffer.alloc(options.size, "x");
  body.write(prefix, 0);
  body.write(suffix, options.size - suffix.length);
  const url = new URL(`${server.url}/auth/v1${path}`);
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method,
      headers: {
        apikey: server.anonKey,
        "content-type": type,
        ...(options.chunked ? {} : { "content-length": String(options.size) }),
        ...options.headers,
      },
    });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () =>
        resolve({
          status: res.statusCode!,
          body: text ? JSON.parse(text) : undefined,
          connection: res.headers.connection,
        }),
      );
    });
    // The server may answer and close before the whole body is sent: the answer is what counts.
    req.on("error", (e) => {
      if (!/EPIPE|ECONNRESET/.test(e.message)) reject(e);
    });
    // Written in pieces, as a chunked upload comes.
    for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.subarray(i, i + 64 * 1024));
    req.end();
  });
}

describe("request bodies over /auth/v1's limit", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  const userCount = async () => (await server.sql("select count(*)::int as n from auth.users")).rows[0].n;

  it("answers a 10 MB body to /token with 413 in the auth server's shape, not 500", async () => {
    const res = await send(server, "POST", "/token?grant_type=password", { size: 10 * 1024 * 1024 });
    expect(res.status).toBe(413);
    expect(res.body).toEqual(TOO_LARGE);
    // The rest of the body was not read: the connection is not kept for another request.
    expect(res.connection).toBe("close");
  });

  it("refuses one byte over the limit and reads a body of exactly the limit", async () => {
    const over = await send(server, "POST", "/token?grant_type=password", { size: LIMIT + 1 });
    expect(over.status).toBe(413);
    expect(over.body).toEqual(TOO_LARGE);
    const at = await send(server, "POST", "/token?grant_type=password", { size: LIMIT });
    // Read and judged on its content: the password grant needs a password.
    expect(at.status).toBe(400);
    expect(at.body.error_code).not.toBe("request_entity_too_large");
  });

  it("refuses a chunked body without a length once it passes the limit, and creates no user", async () => {
    const before = await userCount();
    const res = await send(server, "POST", "/signup", { size: 2 * LIMIT, chunked: true });
    expect(res.status).toBe(413);
    expect(res.body).toEqual(TOO_LARGE);
    expect(await userCount()).toBe(before);
  });

  it("answers 413 on every route family, whatever the body's type, before the route runs", async () => {
    const service = { apikey: server.serviceKey, authorization: `Bearer ${server.serviceKey}` };
    const routes: [string, string, Record<string, string>?][] = [
      ["POST", "/signup"],
      ["POST", "/otp"],
      ["POST", "/magiclink"],
      ["POST", "/recover"],
      ["POST", "/resend"],
      ["POST", "/verify"],
      ["POST", "/token?grant_type=refresh_token"],
      ["PUT", "/user"],
      ["POST", "/logout"],
      ["POST", "/factors"],
      ["POST", "/sso"],
      ["POST", "/sso/saml/acs"],
      ["POST", "/invite", service],
      ["POST", "/admin/users", service],
      ["PUT", "/admin/users/00000000-0000-0000-0000-000000000000", service],
      ["POST", "/admin/generate_link", service],
    ];
    const before = await userCount();
    for (const [method, path, headers] of routes) {
      for (const type of ["application/json", "application/x-www-form-urlencoded", "text/plain"]) {
        const res = await send(server, method, path, { size: 3 * LIMIT, type, headers });
        expect({ route: `${method} ${path} (${type})`, status: res.status, body: res.body }).toEqual({
          route: `${method} ${path} (${type})`,
          status: 413,
          body: TOO_LARGE,
        });
      }
    }
    expect(await userCount()).toBe(before);
  });

  it("still signs users up and in with ordinary bodies", async () => {
    const headers = { apikey: server.anonKey, "content-type": "application/json" };
    const signup = await fetch(`${server.url}/auth/v1/signup`, {
      method: "POST",
      headers,
      body: JSON.stringify({ email: "within-limit@example.com", password: "a-long-password-1" }),
    });
    expect(signup.status).toBe(200);
    const token = await fetch(`${server.url}/auth/v1/token?grant_type=password`, {
      method: "POST",
      headers,
      body: JSON.stringify({ email: "within-limit@example.com", password: "a-long-password-1" }),
    });
    expect(token.status).toBe(200);
    expect(((await token.json()) as { access_token?: string }).access_token).toEqual(expect.any(String));
  });
});
