import type { TestServer } from "../helpers/server";
import { mgmt } from "../management/client";

/** SQL as the tenant: the Management API's SQL endpoint, which runs as the project's owner. */
export async function tenantSql(server: TestServer, query: string, ref = server.ref): Promise<any[]> {
  const res = await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, { body: { query } });
  if (res.status !== 201) throw new Error(`${res.status}: ${res.body?.message}`);
  return res.body;
}

/** The tenant's SQL that must fail: answers PostgreSQL's message. */
export async function tenantSqlError(server: TestServer, query: string, ref = server.ref): Promise<string> {
  const res = await mgmt(server, "POST", `/v1/projects/${ref}/database/query`, { body: { query } });
  expect(res.status).toBe(400);
  return res.body.message;
}
