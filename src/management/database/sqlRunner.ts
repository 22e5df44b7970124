import pg from "pg";
import { ensureLoginPassword } from "../../db/loginRoles";
import type { AppContext } from "../../context";
import type { ProjectRuntime } from "../../projects/runtime";
import { randomSecret } from "../../platform/ids";
import { HttpError } from "../http";

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

async function readOnlyUrl(ctx: AppContext, project: ProjectRuntime): Promise<string> {
  const { rows } = await ctx.platformPool.query(
    `update platform.clusters c set readonly_password = coalesce(c.readonly_password, $2)
       from platform.projects p where p.ref = $1 and c.id = p.cluster_id returning c.readonly_password`,
    [project.ref, randomSecret(24)],
  );
  return ensureLoginPassword(project.record.adminUrl, "strata_readonly", rows[0].readonly_password);
}

export interface SqlRequest {
  query: string;
  parameters?: unknown[];
  readOnly: boolean;
}

/**
 * Runs `query` as the project's owner, or as the read-only login role when `readOnly` (it cannot write,
 * whatever the SQL does). Several statements are allowed without parameters. DDL invalidates the
 * project's API caches before answering, so the next data request sees it.
 */
export async function runSql(ctx: AppContext, project: ProjectRuntime, req: SqlRequest): Promise<unknown[]> {
  const client = req.readOnly
    ? new pg.Client({ connectionString: await readOnlyUrl(ctx, project) })
    : new pg.Client({ connectionString: project.record.adminUrl });
  await client.connect();
  try {
    const params = req.parameters ?? [];
    const result = params.length
      ? await client.query({ text: req.query, values: params, types })
      : await client.query({ text: req.query, types });
    if (!req.readOnly && changedSchema(result)) project.invalidateSchema("database/query");
    return rowsOf(result);
  } catch (e) {
    const err = e as { message: string; code?: string };
    if (err.code) throw new HttpError(400, err.message);
    throw e;
  } finally {
    await client.end().catch(() => {});
  }
}
