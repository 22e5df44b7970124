import type pg from "pg";
import type { RequestAuth } from "../auth/dataAuth";
import type { ProjectRuntime } from "../projects/runtime";

export interface DataTransactionOptions {
  readOnly?: boolean;
  /** Further `set_config(name, value, true)` settings, e.g. request.method or search_path. */
  settings?: Record<string, string>;
}

/**
 * Runs `work` in one transaction on the project's authenticator pool with the request's role and claims set
 * locally (`set_config(..., true)`), so grants and row level security decide. Commits when `work` resolves,
 * rolls back when it throws.
 */
export async function withDataTransaction<T>(
  project: ProjectRuntime,
  auth: RequestAuth,
  work: (client: pg.PoolClient) => Promise<T>,
  options: DataTransactionOptions = {},
): Promise<T> {
  const client = await project.dataPool.connect();
  let healthy = true;
  try {
    const settings: Record<string, string> = {
      ...options.settings,
      role: auth.role,
      "request.jwt.claims": JSON.stringify(auth.claims),
    };
    // One round trip: BEGIN and the settings as a single simple-protocol message, values escaped by pg.
    const configs = Object.entries(settings).map(
      ([name, value]) => `set_config(${client.escapeLiteral(name)}, ${client.escapeLiteral(value)}, true)`,
    );
    await client.query(`${options.readOnly ? "begin read only" : "begin"}; select ${configs.join(", ")}`);
    const result = await work(client);
    await client.query("commit");
    return result;
  } catch (e) {
    await client.query("rollback").catch(() => {
      healthy = false;
    });
    throw e;
  } finally {
    client.release(healthy ? undefined : true);
  }
}
