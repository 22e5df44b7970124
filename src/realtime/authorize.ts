import type pg from "pg";
import type { RequestAuth } from "../auth/dataAuth";
import { withAdminTransaction } from "../db/transaction";

/** What a role may do on a private channel, by the RLS policies on realtime.messages. */
export interface TopicRights {
  read: boolean;
  /** Broadcast may be sent. */
  write: boolean;
  /** Presence may be tracked. */
  presence: boolean;
}

class Probe extends Error {
  constructor(readonly rights: TopicRights) {
    super("probe");
  }
}

/**
 * Asks the policies as the platform does: probe rows for the topic (extensions broadcast and presence) are
 * written as the project's owner (who owns realtime.messages, so past its RLS), then read as the caller's
 * role with `realtime.topic()` set (read), and one of each is inserted as that role (write: broadcast;
 * presence: track). Everything is rolled back. `pool` is the project's realtime authorization pool (its
 * `connection_pool` setting), logged in as the project's SQL login: the policies are the tenant's code, and
 * on a superuser's session that code could `reset role` back to the superuser.
 */
export async function authorizeTopic(
  pool: pg.Pool,
  ownerRole: string,
  auth: RequestAuth,
  topic: string,
): Promise<TopicRights> {
  try {
    await withAdminTransaction(pool, async (client) => {
      await client.query("select set_config('role', $1, true)", [ownerRole]);
      const { rows } = await client.query(
        `insert into realtime.messages (topic, extension, private)
         values ($1, 'broadcast', true), ($1, 'presence', true) returning id`,
        [topic],
      );
      await client.query(
        `select set_config('role', $1, true), set_config('request.jwt.claims', $2, true),
                set_config('realtime.topic', $3, true)`,
        [auth.role, JSON.stringify(auth.claims), topic],
      );
      const seen = await client.query("select id from realtime.messages where id = any($1::uuid[])", [
        rows.map((r) => r.id),
      ]);
      const canInsert = async (extension: string) => {
        await client.query("savepoint probe_write");
        try {
          await client.query(
            "insert into realtime.messages (topic, extension, private) values ($1, $2, true)",
            [topic, extension],
          );
          return true;
        } catch {
          await client.query("rollback to savepoint probe_write");
          return false;
        }
      };
      const write = await canInsert("broadcast");
      const presence = await canInsert("presence");
      throw new Probe({ read: (seen.rowCount ?? 0) > 0, write, presence });
    });
  } catch (e) {
    if (e instanceof Probe) return e.rights;
    throw e;
  }
  return { read: false, write: false, presence: false };
}
