import http from "node:http";
import type { TestServer } from "../helpers/server";

export interface Reply {
  status: number;
  headers: Headers;
  body: any;
}

/** Calls the Management API as a client would: bearer token, JSON in and out. */
export async function mgmt(
  server: TestServer,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string | null } = {},
): Promise<Reply> {
  const token = opts.token === undefined ? server.managementToken : opts.token;
  const res = await fetch(server.url + path, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(opts.body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** A data request to a project's own host (`<ref>.localhost`), sent to the test server's address. */
export function atProjectHost(
  server: TestServer,
  ref: string,
  path: string,
  opts: { apikey: string; body?: unknown },
): Promise<{ status: number; body: any }> {
  const url = new URL(server.url);
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: payload ? "POST" : "GET",
        headers: {
          host: `${ref}.localhost`,
          apikey: opts.apikey,
          ...(payload ? { "content-type": "application/json" } : {}),
        },
      },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }),
        );
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** Polls GET /v1/projects/{ref} until the project reaches `status`. */
export async function waitForStatus(server: TestServer, ref: string, status: string): Promise<void> {
  for (let i = 0; i < 150; i++) {
    const res = await mgmt(server, "GET", `/v1/projects/${ref}`);
    if (res.body?.status === status) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`project ${ref} did not reach ${status}`);
}
