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

/**
 * Locks the organization's row until the caller's transaction ends: changes to its members wait for each
 * other, so that two at once cannot leave it without an Owner.
 */
export async function lockOrganization(client: pg.ClientBase, organizationId: string): Promise<void> {
  await client.query("select from platform.organizations where id = $1 for update", [organizationId]);
}

export async function findMember(
  db: pg.Pool | pg.ClientBase,
  organizationId: string,
  userId: string,
): Promise<MemberRow | undefined> {
  return firstRow(
    db,
    `select u.id as user_id, u.username, u.email, m.role_name
       from platform.organization_members m join platform.users u on u.id = m.user_id
      where m.organization_id = $1 and m.user_id = $2`,
    [organizationId, userId],
  );
}

export async function hasMemberWithEmail(
  db: pg.Pool,
  organizationId: string,
  email: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `select from platform.organization_members m join platform.users u on u.id = m.user_id
      where m.organization_id = $1 and u.email = $2`,
    [organizationId, email],
  );
  return rowCount !== 0;
}

export async function ownerCount(client: pg.ClientBase, organizationId: string): Promise<number> {
  const row = await oneRow<{ n: number }>(
    client,
    "select count(*)::int as n from platform.organization_members where organization_id = $1 and role_name = 'Owner'",
    [organizationId],
  );
  return row.n;
}

/** Makes the user a member with `roleName`; one who already is keeps the role they have. Answers their role. */
export async function addMember(
  client: pg.ClientBase,
  organizationId: string,
  userId: string,
  roleName: string,
): Promise<string> {
  const row = await oneRow<{ role_name: string }>(
    client,
    `insert into platform.organization_members (organization_id, user_id, role_name) values ($1, $2, $3)
     on conflict (organization_id, user_id) do update set role_name = organization_members.role_name
     returning role_name`,
    [organizationId, userId, roleName],
  );
  return row.role_name;
}

export async function setMemberRole(
  client: pg.ClientBase,
  organizationId: string,
  userId: string,
  roleName: string,
): Promise<void> {
  await client.query(
    "update platform.organization_members set role_name = $3 where organization_id = $1 and user_id = $2",
    [organizationId, userId, roleName],
  );
}

/**
 * Removes the member, with the OAuth grants they gave applications in this organization (their tokens act
 * only there). Their sessions and personal tokens stay theirs and no longer reach the organization.
 */
export async function removeMember(
  client: pg.ClientBase,
  organizationId: string,
  userId: string,
): Promise<void> {
  await client.query(
    "delete from platform.organization_members where organization_id = $1 and user_id = $2",
    [organizationId, userId],
  );
  await client.query(
    "delete from platform.oauth_refresh_tokens where organization_id = $1 and user_id = $2",
    [organizationId, userId],
  );
  await client.query("delete from platform.access_tokens where organization_id = $1 and user_id = $2", [
    organizationId,
    userId,
  ]);
}

/** The organization's projects where the user holds just-in-time roles. */
export async function projectsWithJitGrants(
  db: pg.Pool,
  organizationId: string,
  userId: string,
): Promise<string[]> {
  const rows = await allRows<{ ref: string }>(
    db,
    `select distinct p.ref from platform.jit_grants g join platform.projects p on p.ref = g.project_ref
      where p.organization_id = $1 and g.user_id = $2`,
    [organizationId, userId],
  );
  return rows.map((r) => r.ref);
}
