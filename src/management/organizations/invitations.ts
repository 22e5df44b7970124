import type pg from "pg";
import { randomSecret, sha256 } from "../../platform/ids";
import { allRows, firstRow, oneRow } from "../rows";

/**
 * Invitations to an organization (platform.organization_invitations): an email, the role it will have, and a
 * token (answered once, kept as its SHA-256 hash) that the invitee presents once within `INVITATION_DAYS`.
 */

export const INVITATION_DAYS = 7;

export interface InvitationRow {
  id: string;
  organization_id: string;
  email: string;
  role_name: string;
  mailed: boolean;
  invited_at: Date;
  expires_at: Date;
}

const COLUMNS = "id, organization_id, email, role_name, mailed, invited_at, expires_at";

/**
 * Records an invitation of `email` to the organization, replacing an earlier one of the same email (whose
 * token stops working); answers it with its token. Runs in the caller's transaction, which a failed mail
 * rolls back.
 */
export async function createInvitation(
  client: pg.ClientBase,
  invitation: { organizationId: string; email: string; roleName: string; mailed: boolean; invitedBy: string },
): Promise<{ invitation: InvitationRow; token: string }> {
  const token = randomSecret(32);
  const row = await oneRow<InvitationRow>(
    client,
    `insert into platform.organization_invitations
       (organization_id, email, role_name, token_hash, mailed, invited_by, expires_at)
     values ($1, $2, $3, $4, $5, $6, now() + make_interval(days => $7))
     on conflict (organization_id, email) do update
       set role_name = excluded.role_name, token_hash = excluded.token_hash, mailed = excluded.mailed,
           invited_by = excluded.invited_by, invited_at = now(), expires_at = excluded.expires_at
     returning ${COLUMNS}`,
    [
      invitation.organizationId,
      invitation.email,
      invitation.roleName,
      sha256(token),
      invitation.mailed,
      invitation.invitedBy,
      INVITATION_DAYS,
    ],
  );
  return { invitation: row, token };
}

/** The organization's invitations not yet accepted (expired ones included, marked by `expires_at`). */
export async function listInvitations(db: pg.Pool, organizationId: string): Promise<InvitationRow[]> {
  return allRows<InvitationRow>(
    db,
    `select ${COLUMNS} from platform.organization_invitations where organization_id = $1 order by invited_at, id`,
    [organizationId],
  );
}

export async function findInvitation(
  db: pg.Pool,
  organizationId: string,
  id: string,
): Promise<InvitationRow | undefined> {
  return firstRow<InvitationRow>(
    db,
    `select ${COLUMNS} from platform.organization_invitations where organization_id = $1 and id = $2`,
    [organizationId, id],
  );
}

export async function deleteInvitation(db: pg.Pool, id: string): Promise<void> {
  await db.query("delete from platform.organization_invitations where id = $1", [id]);
}

/**
 * Takes the live invitation `token` opens, inside the caller's transaction: deleted as it is taken, so of two
 * acceptances at once only one gets it (the other waits on the row, then finds none). Undefined: no such
 * invitation, or it expired.
 */
export async function takeInvitation(
  client: pg.ClientBase,
  token: string,
): Promise<(InvitationRow & { organization_slug: string; organization_name: string }) | undefined> {
  return firstRow(
    client,
    `with taken as (
       delete from platform.organization_invitations where token_hash = $1 returning ${COLUMNS}
     )
     select t.*, o.slug as organization_slug, o.name as organization_name
       from taken t join platform.organizations o on o.id = t.organization_id
      where t.expires_at > now()`,
    [sha256(token)],
  );
}
