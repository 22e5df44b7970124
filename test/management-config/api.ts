import type { TestServer } from "../helpers/server";

/** A Management API call with the bootstrap admin's token; answers status and parsed body. */
export async function mgmt(server: TestServer, method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
