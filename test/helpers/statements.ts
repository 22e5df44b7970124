import pg from "pg";

/** One message sent to the database: its text and, for a parameterised statement, its values. */
export interface SentStatement {
  text: string;
  values?: unknown[];
}

/**
 * The messages sent on the data logins (`authenticator_<ref>`: data requests) while `work` runs: the server's own
 * bookkeeping (usage, logs, webhooks) logs in otherwise and is not counted.
 */
export async function authenticatorMessagesDuring(work: () => Promise<unknown>): Promise<SentStatement[]> {
  const seen: SentStatement[] = [];
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as string | { text?: string; values?: unknown[] };
    const user = (this as unknown as { connectionParameters?: { user?: string } }).connectionParameters?.user;
    if (user?.startsWith("authenticator_")) {
      seen.push(
        typeof config === "string"
          ? { text: config, values: args[1] as unknown[] | undefined }
          : { text: config?.text ?? "", values: config?.values },
      );
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
  try {
    await work();
  } finally {
    pg.Client.prototype.query = original;
  }
  return seen;
}

/** The statements' texts sent on `authenticator` connections while `work` runs, one per message. */
export async function authenticatorStatementsDuring(work: () => Promise<unknown>): Promise<string[]> {
  return (await authenticatorMessagesDuring(work)).map((m) => m.text);
}
