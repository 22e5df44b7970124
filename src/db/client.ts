import pg from "pg";

/**
 * Startup options of Strata's superuser sessions on a project's database: names resolve in pg_catalog only.
 * The tenant may create functions and operators in its own schemas (`public`), and one with a closer argument
 * type (`public.format(text, variadic text[])`, `public.lower(name)`) would otherwise be chosen over the
 * built-in and run with the superuser's rights. Strata's own objects are always named with their schema.
 */
export const CATALOG_ONLY_SESSION = "-c search_path=pg_catalog,pg_temp";

/**
 * A client for one piece of work. An error on its connection while no query runs (the server restarted, the
 * session was ended) surfaces as that work's failure, never as an uncaught error that ends the process.
 */
export function oneOffClient(config: pg.ClientConfig): pg.Client {
  const client = new pg.Client(config);
  client.on("error", () => {});
  return client;
}

/** Runs `work` on a one-off client connected for it, and ends the connection afterwards, whatever happens. */
export async function withOneOffClient<T>(
  config: pg.ClientConfig,
  work: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = oneOffClient(config);
  try {
    await client.connect();
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}
