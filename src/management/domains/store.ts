import { withAdminTransaction } from "../../db/transaction";
import type pg from "pg";

export interface HostnameRow {
  hostname: string;
  project_ref: string;
  kind: "custom" | "vanity";
  status: string;
  verification_token: string;
  verification_errors: string[];
}

/** A project's custom hostname or vanity subdomain row, if it has one. */
export async function hostnameOf(
  db: pg.Pool,
  ref: string,
  kind: HostnameRow["kind"],
): Promise<HostnameRow | undefined> {
  const { rows } = await db.query<HostnameRow>(
    "select * from platform.project_hostnames where project_ref = $1 and kind = $2",
    [ref, kind],
  );
  return rows[0];
}

export async function isHostnameTaken(db: pg.Pool, hostname: string, exceptRef?: string): Promise<boolean> {
  const { rowCount } = await db.query(
    "select 1 from platform.project_hostnames where hostname = $1 and project_ref is distinct from $2",
    [hostname, exceptRef ?? null],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Gives the project `hostname` as its name of `kind`, replacing the one it had; answers false when another
 * project holds the name (the primary key decides, so two projects racing for it cannot both win).
 */
export async function claimHostname(
  db: pg.Pool,
  row: Omit<HostnameRow, "verification_errors">,
): Promise<boolean> {
  return withAdminTransaction(db, async (client) => {
    await client.query("delete from platform.project_hostnames where project_ref = $1 and kind = $2", [
      row.project_ref,
      row.kind,
    ]);
    const { rowCount } = await client.query(
      `insert into platform.project_hostnames (hostname, project_ref, kind, status, verification_token)
       values ($1, $2, $3, $4, $5) on conflict (hostname) do nothing`,
      [row.hostname, row.project_ref, row.kind, row.status, row.verification_token],
    );
    // Taken: undo the delete too, the project keeps the name it had.
    if (!rowCount) throw new HostnameTaken();
    return true;
  }).catch((e: unknown) => {
    if (e instanceof HostnameTaken) return false;
    throw e;
  });
}

class HostnameTaken extends Error {}

export async function setHostnameStatus(
  db: pg.Pool,
  ref: string,
  kind: HostnameRow["kind"],
  status: string,
  errors: string[],
): Promise<void> {
  await db.query(
    `update platform.project_hostnames set status = $3, verification_errors = $4::jsonb, updated_at = now()
      where project_ref = $1 and kind = $2`,
    [ref, kind, status, JSON.stringify(errors)],
  );
}

export async function releaseHostname(db: pg.Pool, ref: string, kind: HostnameRow["kind"]): Promise<void> {
  await db.query("delete from platform.project_hostnames where project_ref = $1 and kind = $2", [ref, kind]);
}
