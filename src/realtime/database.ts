import { withTransaction } from "../db/transaction";
import type { ProjectRuntime } from "../projects/runtime";

/**
 * Broadcast from the database (sql/project/750_realtime_broadcast.sql): realtime.send stores a message in
 * realtime.messages and announces it with NOTIFY on the nodes' shared channel, `{"db": {id, topic, event,
 * private, payload}}`, or `{"db": {id}}` when the message is too large for NOTIFY. Every node turns the
 * announcement into a broadcast for the topic's subscribers on its own sockets.
 *
 * The announcement comes from the tenant's database (any of its functions may NOTIFY), so it is read as
 * untrusted input; a message announced by id is read back on the project's SQL login as the owner (who owns
 * realtime.messages), never on a superuser session.
 */

/** A message of realtime.messages as its subscribers get it. */
export interface DatabaseMessage {
  id: string;
  topic: string;
  event: string;
  private: boolean;
  payload: unknown;
}

/** How long the platform keeps realtime.messages (its partitions of older days are dropped). */
export const MESSAGE_RETENTION = "72 hours";

function isMessage(m: Record<string, unknown>): boolean {
  return (
    typeof m.id === "string" &&
    typeof m.topic === "string" &&
    typeof m.event === "string" &&
    typeof m.private === "boolean" &&
    m.payload !== undefined &&
    m.payload !== null
  );
}

/** The message an announcement names: itself, or the stored row of its id (gone or malformed: none). */
export async function messageOf(
  project: ProjectRuntime,
  announcement: Record<string, unknown>,
): Promise<DatabaseMessage | undefined> {
  if (isMessage(announcement)) return announcement as unknown as DatabaseMessage;
  const id = announcement.id;
  if (typeof id !== "string" || !/^[0-9a-f-]{36}$/i.test(id)) return undefined;
  const { rows } = await withTransaction(project.ownerPool, project.asOwnerScope, (client) =>
    client.query(
      `select id::text, topic, event, coalesce(private, false) as private, payload
         from realtime.messages where id = $1::uuid and extension = 'broadcast'`,
      [id],
    ),
  );
  const row = rows[0] as Record<string, unknown> | undefined;
  return row && isMessage(row) ? (row as unknown as DatabaseMessage) : undefined;
}

/**
 * Deletes the messages older than the retention, as the owner. One node at a time (a transaction-level
 * advisory lock): another node finding it taken skips its turn. Answers how many rows went.
 */
export async function pruneMessages(project: ProjectRuntime): Promise<number> {
  return withTransaction(project.ownerPool, project.asOwnerScope, async (client) => {
    const { rows } = await client.query(
      "select pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('strata realtime.messages prune')) as mine",
    );
    if (!rows[0]?.mine) return 0;
    const { rowCount } = await client.query(
      `delete from realtime.messages where inserted_at < localtimestamp - interval '${MESSAGE_RETENTION}'`,
    );
    return rowCount ?? 0;
  });
}
