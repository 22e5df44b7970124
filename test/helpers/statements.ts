import pg from "pg";

/**
 * The statements sent on `authenticator` connections (data requests) while `work` runs, one per message:
 * the server's own bookkeeping (usage, logs, webhooks) logs in otherwise and is not counted.
 */
export async function authenticatorStatementsDuring(work: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as string | { text?: string };
    const user = (this as unknown as { connectionParameters?: { user?: string } }).connectionParameters?.user;
    if (user === "authenticator") seen.push(typeof config === "string" ? config : (config?.text ?? ""));
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  try {
    await work();
  } finally {
    pg.Client.prototype.query = original;
  }
  return seen;
}
