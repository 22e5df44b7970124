import type pg from "pg";
import { asPoolTimeout } from "./errors";

/**
 * Connections whose session state is unknown (a rollback or a close of prepared statements failed on them):
 * the pool must not hand them out again.
 */
const broken = new WeakSet<pg.ClientBase>();

export function markBroken(client: pg.ClientBase): void {
  broken.add(client);
}

/** Lends a pooled client to `use`, destroying it afterwards when it was marked broken meanwhile. */
export async function withPooledClient<T>(
  pool: pg.Pool,
  use: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect().catch((e: Error) => {
    throw asPoolTimeout(e);
  });
  try {
    return await use(client);
  } finally {
    client.release(broken.has(client) || undefined);
  }
}
