import { withAdminTransaction } from "../../db/transaction";
import type pg from "pg";
import { firstRow } from "../rows";

// The platform's custom hostname states (its Cloudflare flow); Strata uses the ones that apply to it.
export const NOT_STARTED = "1_not_started";
export const INITIATED = "2_initiated";
export const VERIFIED = "4_origin_setup_completed";
export const SERVED = "5_services_reconfigured";

/**
 * The rows that hold their name (unique among them, sql/platform/931_hostname_claims.sql): a vanity subdomain,
 * or a custom hostname whose DNS records verified for its project. A custom hostname only initialized is a
 * request, which any number of projects may have for one name.
 */
const CLAIMED = `(kind = 'vanity' or status in ('${VERIFIED}', '${SERVED}'))`;

export interface HostnameRow {
  hostname: string;
  project_ref: string;
  kind: "custom" | "vanity";
  status: string;
  verification_token: string;
  verification_errors: string[];
}

/** A project's custom hostname or vanity subdomain row, if it has one. */
export async function hostnameOf(db: pg.Pool, ref: string, kind: HostnameRow["kind"]) {
  return firstRow<HostnameRow>(
    db,
    "select * from platform.project_hostnames where project_ref = $1 and kind = $2",
    [ref, kind],
  );
}

/** Whether another project holds `hostname` (a request for a custom hostname holds nothing). */
export async function isHostnameTaken(db: pg.Pool, hostname: string, exceptRef: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `select 1 from platform.project_hostnames where hostname = $1 and project_ref <> $2 and ${CLAIMED}`,
    [hostname, exceptRef],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Records the project's request for a custom hostname with its own verification token, replacing a request
 * for another name (and the name it held); asking again for the same name keeps the request as it is, so
 * the records already made for its token stay right.
 */
export async function requestCustomHostname(
  db: pg.Pool,
  ref: string,
  hostname: string,
  token: string,
): Promise<void> {
  await db.query(
    `insert into platform.project_hostnames (hostname, project_ref, kind, status, verification_token)
     values ($1, $2, 'custom', $3, $4)
     on conflict (project_ref, kind) do update
       set hostname = excluded.hostname, status = excluded.status, verification_token = excluded.verification_token,
           verification_errors = '[]', updated_at = now()
     where project_hostnames.hostname <> excluded.hostname`,
    [hostname, ref, INITIATED, token],
  );
}

/**
 * Records what `reverify` found for the project's custom hostname. Records that verify make the name the
 * project's: the DNS owner pointed it here, so a project that held it before (whose records can no longer be
 * right) goes back to a request. Records that do not verify leave a served name served (its records may be
 * changing) and take an unserved one back to a request.
 */
export async function recordVerification(db: pg.Pool, row: HostnameRow, errors: string[]): Promise<void> {
  await withAdminTransaction(db, async (client) => {
    if (errors.length === 0) {
      // Every request for the name, locked in one order: two verifications of one name run one after the other.
      await client.query(
        `select 1 from platform.project_hostnames where hostname = $1 and kind = 'custom'
          order by project_ref for update`,
        [row.hostname],
      );
      await client.query(
        `update platform.project_hostnames set status = $3, verification_errors = $4::jsonb, updated_at = now()
          where hostname = $1 and kind = 'custom' and project_ref <> $2 and ${CLAIMED}`,
        [
          row.hostname,
          row.project_ref,
          INITIATED,
          JSON.stringify([
            `The DNS records of ${row.hostname} no longer verify for this project: reverify once they do`,
          ]),
        ],
      );
    }
    await client.query(
      `update platform.project_hostnames
          set status = case when status = $3 then status when $4::jsonb = '[]' then $5 else $6 end,
              verification_errors = $4::jsonb, updated_at = now()
        where project_ref = $1 and kind = 'custom' and hostname = $2`,
      [row.project_ref, row.hostname, SERVED, JSON.stringify(errors), VERIFIED, INITIATED],
    );
  });
}

/** Serves the project's custom hostname if its records verified; answers false when they have not. */
export async function activateCustomHostname(db: pg.Pool, ref: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `update platform.project_hostnames set status = $2, verification_errors = '[]', updated_at = now()
      where project_ref = $1 and kind = 'custom' and status in ($3, $2)`,
    [ref, SERVED, VERIFIED],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Gives the project `hostname` as its vanity subdomain, replacing the one it had; answers false when another
 * project holds the name (the unique index decides, so two projects racing for it cannot both win).
 */
export async function claimVanityHostname(db: pg.Pool, ref: string, hostname: string): Promise<boolean> {
  return db
    .query(
      `insert into platform.project_hostnames (hostname, project_ref, kind, status) values ($1, $2, 'vanity', 'active')
       on conflict (project_ref, kind) do update set hostname = excluded.hostname, updated_at = now()`,
      [hostname, ref],
    )
    .then(
      () => true,
      (e: { code?: string; constraint?: string }) => {
        if (e.code === "23505" && e.constraint === "project_hostnames_claimed") return false;
        throw e;
      },
    );
}

export async function releaseHostname(db: pg.Pool, ref: string, kind: HostnameRow["kind"]): Promise<void> {
  await db.query("delete from platform.project_hostnames where project_ref = $1 and kind = $2", [ref, kind]);
}
