import type pg from "pg";
import { randomInt } from "node:crypto";
import { withAdminTransaction } from "../../db/transaction";
import { allRows, firstRow, oneRow } from "../rows";

export interface OrganizationRow {
  id: string;
  slug: string;
  name: string;
  plan: string;
  /** The caller's role in it. */
  role_name: string;
}

export interface MemberRow {
  user_id: string;
  username: string;
  email: string;
  role_name: string;
}

/** Organizations the user belongs to. */
/** The user's organizations; `onlyId` (an OAuth token's organization) narrows them to one. */
export async function listOrganizations(
  db: pg.Pool,
  userId: string,
  onlyId: string | null = null,
): Promise<OrganizationRow[]> {
  return allRows(
    db,
    `select o.id, o.slug, o.name, o.plan, m.role_name from platform.organizations o
       join platform.organization_members m on m.organization_id = o.id and m.user_id = $1
      where $2::uuid is null or o.id = $2
      order by o.created_at, o.slug`,
    [userId, onlyId],
  );
}

/** The organization `slug`, when the user belongs to it. */
export async function findOrganization(
  db: pg.Pool,
  userId: string,
  slug: string,
  onlyId: string | null = null,
): Promise<OrganizationRow | undefined> {
  return firstRow(
    db,
    `select o.id, o.slug, o.name, o.plan, m.role_name from platform.organizations o
       join platform.organization_members m on m.organization_id = o.id and m.user_id = $1
      where o.slug = $2 and ($3::uuid is null or o.id = $3)`,
    [userId, slug, onlyId],
  );
}

function slugBase(name: string): string {
  const base = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40);
  return base || "org";
}

function suffix(): string {
  let s = "";
  for (let i = 0; i < 6; i++) s += String.fromCharCode(97 + randomInt(26));
  return s;
}

/** Creates an organization with a slug derived from its name; the creator becomes its Owner. */
export async function createOrganization(
  db: pg.Pool,
  userId: string,
  name: string,
): Promise<OrganizationRow> {
  return withAdminTransaction(db, async (client) => {
    let org: OrganizationRow | undefined;
    for (let attempt = 0; !org; attempt++) {
      const slug = attempt === 0 ? slugBase(name) : `${slugBase(name)}-${suffix()}`;
      const { rows } = await client.query(
        `insert into platform.organizations (slug, name) values ($1, $2)
         on conflict (slug) do nothing returning id, slug, name, plan, 'Owner' as role_name`,
        [slug, name],
      );
      org = rows[0];
    }
    await client.query(
      "insert into platform.organization_members (organization_id, user_id, role_name) values ($1, $2, 'Owner')",
      [org.id, userId],
    );
    return org;
  });
}

/** Members ordered by user id (the cursor of the v2 listing). */
export async function listMembers(db: pg.Pool, organizationId: string): Promise<MemberRow[]> {
  return allRows(
    db,
    `select u.id as user_id, u.username, u.email, m.role_name
       from platform.organization_members m join platform.users u on u.id = m.user_id
      where m.organization_id = $1 order by u.id`,
    [organizationId],
  );
}

/** A user's profile fields. */
export async function userProfile(
  db: pg.Pool,
  userId: string,
): Promise<{ id: string; email: string; username: string }> {
  return oneRow(db, "select id, email, username from platform.users where id = $1", [userId]);
}
