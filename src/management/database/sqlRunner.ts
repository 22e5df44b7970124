import pg from "pg";
import { runUtilityStatement } from "../../db/utility";
import type { ProjectRuntime } from "../../projects/runtime";
import { HttpError } from "../http";
import { oneOffClient } from "../../db/client";
import { withBuiltInExtensions } from "../../modules/extensions";
import { openVaultSession } from "../../modules/vault";

/** Runs SQL from the Management API in a project's database and answers rows as JSON objects. */

// int8 as a JSON number when it fits, as PostgreSQL's own JSON rendering does.
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === 20) return (v: string) => (Number.isSafeInteger(Number(v)) ? Number(v) : v);
    return pg.types.getTypeParser(oid, format);
  },
};

const NON_DDL = new Set([
  "SELECT",
  "INSERT",
  "UPDATE",
  "DELETE",
  "MERGE",
  "COPY",
  "FETCH",
  "SHOW",
  "EXPLAIN",
  "VALUES",
  "BEGIN",
  "COMMIT",
  "ROLLBACK",
  "SET",
]);

function rowsOf(result: pg.QueryResult | pg.QueryResult[]): unknown[] {
  const results = Array.isArray(result) ? result : [result];
  const last = [...results].reverse().find((r) => r.fields?.length) ?? results[results.length - 1];
  return last?.rows ?? [];
}

function changedSchema(result: pg.QueryResult | pg.QueryResult[]): boolean {
  const results = Array.isArray(result) ? result : [result];
  return results.some((r) => r.command && !NON_DDL.has(r.command));
}

/**
 * Runs `work` on a connection of its own as the project's SQL login (acting as the project's owner, never a
 * superuser) or, for read-only work, as its read-only login. The connection ends afterwards, so nothing a
 * statement leaves in the session (SET, an open transaction) reaches another call.
 */
export async function withProjectSqlClient<T>(
  project: ProjectRuntime,
  readOnly: boolean,
  work: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = oneOffClient({
    connectionString: readOnly ? project.record.readUrl : project.record.sqlUrl,
  });
  await client.connect();
  try {
    if (!readOnly) {
      // The owner's session: vault.decrypted_secrets decrypts in it (src/modules/vault.ts).
      await openVaultSession(client, project);
      await runUtilityStatement(client, "set role %I", [project.record.ownerRole]);
    }
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export interface SqlRequest {
  query: string;
  parameters?: unknown[];
  readOnly: boolean;
}

/**
 * Runs `query` as the project's owner, or as its read-only login role when `readOnly` (it can only read the
 * project's own schemas, whatever the SQL does). Several statements are allowed without parameters. DDL invalidates the
 * project's API caches before answering, so the next data request sees it.
 */
export async function runSql(project: ProjectRuntime, req: SqlRequest): Promise<unknown[]> {
  return withProjectSqlClient(project, req.readOnly, async (client) => {
    const params = req.parameters ?? [];
    const text = req.readOnly ? req.query : await withBuiltInExtensions(client, req.query);
    const result = await (
      params.length ? client.query({ text, values: params, types }) : client.query({ text, types })
    ).catch((e: { message: string; code?: string; position?: string }) => {
      // The SQLSTATE and, for an error in the text, where it is (a 1-based character offset into `query`).
      if (e.code)
        throw new HttpError(400, e.message, {
          code: e.code,
          ...(e.position ? { position: Number(e.position) } : {}),
        });
      throw e;
    });
    if (!req.readOnly && changedSchema(result)) project.invalidateSchema("database/query");
    return rowsOf(result);
  });
}
