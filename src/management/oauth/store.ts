import type pg from "pg";
import { allRows, firstRow } from "../rows";

/** The rows the authorize endpoints and the registration of applications read (the grant's are model.ts's). */

/** The user's organizations, oldest first; with `slug`, that one only. */
export async function userOrganizations(
  db: pg.Pool,
  userId: string,
  slug: string | null,
): Promise<{ id: string; slug: string }[]> {
  return allRows(
    db,
    `select o.id, o.slug from platform.organizations o
       join platform.organization_members m on m.organization_id = o.id and m.user_id = $1
      where $2::text is null or o.slug = $2 order by o.created_at`,
    [userId, slug],
  );
}

/**
 * The organizations a user could claim a project into, oldest first, with the user's role: `slug`'s, or
 * (without one) those the user owns or administers.
 */
export async function claimingOrganizations(
  db: pg.Pool,
  userId: string,
  slug: string | null,
): Promise<{ id: string; slug: string; role_name: string }[]> {
  return allRows(
    db,
    `select o.id, o.slug, m.role_name from platform.organizations o
       join platform.organization_members m on m.organization_id = o.id and m.user_id = $1
      where ($2::text is null or o.slug = $2) and ($2::text is not null or m.role_name in ('Owner', 'Administrator'))
      order by o.created_at`,
    [userId, slug],
  );
}

/** The organization an application is registered under (undefined: no such client). */
export async function appOrganization(db: pg.Pool, clientId: string): Promise<string | undefined> {
  const { rows } = await db.query("select organization_id from platform.oauth_apps where client_id = $1", [
    clientId,
  ]);
  return rows[0]?.organization_id;
}

/** The project `ref` when the organization holds it, and whether it is a branch. */
export async function heldProject(
  db: pg.Pool,
  ref: string,
  organizationId: string,
): Promise<{ organization_id: string; is_branch: boolean } | undefined> {
  return firstRow(
    db,
    `select p.organization_id, exists (select from platform.branches b where b.project_ref = p.ref) as is_branch
       from platform.projects p where p.ref = $1 and p.organization_id = $2`,
    [ref, organizationId],
  );
}

export async function listApps(
  db: pg.Pool,
  organizationId: string,
): Promise<
  {
    id: string;
    name: string;
    client_id: string;
    redirect_uris: string[];
    scopes: string[];
    created_at: Date;
  }[]
> {
  return allRows(
    db,
    `select id, name, client_id, redirect_uris, scopes, created_at from platform.oauth_apps
      where organization_id = $1 order by created_at`,
    [organizationId],
  );
}

/** Deletes an application and every token issued to it; false when the organization has no such client. */
export async function deleteApp(db: pg.Pool, organizationId: string, clientId: string): Promise<boolean> {
  const { rows } = await db.query(
    "delete from platform.oauth_apps where organization_id = $1 and client_id = $2 returning id",
    [organizationId, clientId],
  );
  if (!rows[0]) return false;
  await db.query("delete from platform.access_tokens where oauth_app_id = $1", [rows[0].id]);
  return true;
}
