import { withCredentials } from "./urls";
import { runUtilityStatement } from "./utility";
import { oneOffClient } from "./client";

async function canLogIn(url: string): Promise<boolean> {
  const client = oneOffClient({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Makes `role` log in with `password` on the cluster of `adminUrl`, returning the role's URL. Roles are
 * cluster-wide and several servers may start at once, so the password is only set when it does not work
 * yet, and a concurrent update of the same role is retried.
 */
export async function ensureLoginPassword(adminUrl: string, role: string, password: string): Promise<string> {
  const url = withCredentials(adminUrl, role, password);
  if (await canLogIn(url)) return url;
  for (let attempt = 0; ; attempt++) {
    const client = oneOffClient({ connectionString: adminUrl });
    await client.connect();
    try {
      await runUtilityStatement(client, "alter role %I with login password %L", [role, password]);
      return url;
    } catch (e) {
      if (attempt >= 5 || !/tuple concurrently updated/.test((e as Error).message)) throw e;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    } finally {
      await client.end().catch(() => {});
    }
  }
}
