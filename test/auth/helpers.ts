import type { TestServer } from "../helpers/server";

/** Calls the Management API of the test server with its token. */
export async function management(server: TestServer, method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}/v1/projects/${server.ref}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.managementToken}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A GraphQL request with the given API key and optional bearer token. */
export async function graphql(
  server: TestServer,
  apikey: string | undefined,
  query: string,
  bearer?: string,
) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (apikey !== undefined) headers.apikey = apikey;
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  const res = await fetch(`${server.url}/graphql/v1`, {
    method: "POST",
    headers,
    body: JSON.stringify({ query }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** Waits until the data APIs serve a table created a moment ago (the DDL watch reloads them shortly after). */
export async function waitForTable(server: TestServer, table: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const rest = await fetch(`${server.url}/rest/v1/${table}?limit=0`, {
      headers: { apikey: server.serviceKey },
    });
    const gql = await graphql(
      server,
      server.serviceKey,
      `{ ${table}Collection(first: 0) { edges { cursor } } }`,
    );
    if (rest.status === 200 && !gql.body.errors) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${table} did not appear in the data APIs`);
}
