import { SignJWT } from "jose";
import type { TestServer } from "../helpers/server";

export interface GraphqlResult {
  data?: any;
  errors?: { message: string }[];
}

/** A signed-in user's access token, as the auth server would issue it. */
export async function userToken(server: TestServer, sub: string, role = "authenticated") {
  return new SignJWT({ role, sub })
    .setProtectedHeader({ alg: "HS256" })
    .setExpirationTime("1h")
    .sign(new TextEncoder().encode(server.jwtSecret));
}

/** POSTs a GraphQL document the way a pg_graphql client does (anon key unless told otherwise). */
export async function graphql(
  server: TestServer,
  query: string,
  options: { variables?: unknown; key?: string; token?: string; operationName?: string } = {},
): Promise<GraphqlResult> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    apiKey: options.key ?? server.anonKey,
  };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const res = await fetch(`${server.url}/graphql/v1`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      query,
      variables: options.variables,
      operationName: options.operationName,
    }),
  });
  // The body says why (a 500's cause is only in the server's log otherwise).
  if (res.status !== 200) throw new Error(`POST /graphql/v1 answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as GraphqlResult;
}

/** Applies DDL as the superuser and waits until the API serves the new schema. */
export async function migrate(server: TestServer, sql: string): Promise<void> {
  await server.sql(sql);
  const res = await fetch(`${server.url}/v1/projects/${server.ref}/restart`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.managementToken}` },
  });
  expect(res.status).toBeLessThan(300);
}
