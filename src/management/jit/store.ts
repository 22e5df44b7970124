import { timingSafeEqual } from "node:crypto";
import type pg from "pg";
import { sha256 } from "../../platform/ids";
import { HttpError } from "../http";
import type { GrantRow, JitRole } from "./shapes";
import { allRows } from "../rows";

/** The control plane's record of just-in-time access: members' mappings to roles, and invitations. */

export async function grantsOf(pool: pg.Pool, ref: string, userId?: string): Promise<GrantRow[]> {
  return allRows<GrantRow>(
    pool,
    `select user_id, role, expires_at, allowed_cidrs, allowed_cidrs_v6, branches_only from platform.jit_grants
      where project_ref = $1 and ($2::uuid is null or user_id = $2) order by user_id, role`,
    [ref, userId ?? null],
  );
}

/** Replaces a user's mappings on the project, inside the caller's transaction. */
export async function replaceGrants(client: pg.ClientBase, ref: string, userId: string, roles: JitRole[]) {
  await client.query("delete from platform.jit_grants where project_ref = $1 and user_id = $2", [
    ref,
    userId,
  ]);
  for (const r of roles) {
    await client.query(
      `insert into platform.jit_grants (project_ref, user_id, role, expires_at, allowed_cidrs, allowed_cidrs_v6, branches_only)
       values ($1, $2, $3, to_timestamp($4), $5, $6, $7)`,
      [
        ref,
        userId,
        r.role,
        r.expires_at ?? null,
        (r.allowed_networks?.allowed_cidrs ?? []).map((c) => c.cidr),
        (r.allowed_networks?.allowed_cidrs_v6 ?? []).map((c) => c.cidr),
        r.branches_only ?? false,
      ],
    );
  }
}

export async function isProjectMember(pool: pg.Pool, ref: string, userId: string): Promise<boolean> {
  const { rows } = await pool.query(
    `select from platform.organization_members m join platform.projects p on p.organization_id = m.organization_id
      where p.ref = $1 and m.user_id = $2`,
    [ref, userId],
  );
  return rows.length > 0;
}

/** The emails of `userIds`, by id. */
export async function emailsOf(pool: pg.Pool, userIds: string[]): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ id: string; email: string }>(
    "select id::text, email from platform.users where id = any($1::uuid[])",
    [userIds],
  );
  return new Map(rows.map((u) => [u.id, u.email]));
}

/** A user's email, lowercase (undefined: no such user). */
export async function lowercaseEmailOf(pool: pg.Pool, userId: string): Promise<string | undefined> {
  const { rows } = await pool.query("select lower(email) as email from platform.users where id = $1", [
    userId,
  ]);
  return rows[0]?.email;
}

export interface InviteRow {
  id: string;
  email: string;
  roles: JitRole[];
  /** Seconds since the epoch. */
  expires_at: string;
}

export async function pendingInvites(pool: pg.Pool, ref: string): Promise<InviteRow[]> {
  return allRows<InviteRow>(
    pool,
    `select id, email, roles, extract(epoch from expires_at)::bigint as expires_at from platform.jit_invites
      where project_ref = $1 and expires_at > now() order by created_at`,
    [ref],
  );
}

/** Records an invitation opened by the token of `tokenHash` (expired ones go first); answers its id. */
export async function createInvite(
  pool: pg.Pool,
  ref: string,
  email: string,
  tokenHash: string,
  roles: JitRole[],
): Promise<string> {
  await pool.query("delete from platform.jit_invites where project_ref = $1 and expires_at <= now()", [ref]);
  const { rows } = await pool.query(
    `insert into platform.jit_invites (project_ref, email, token_hash, roles) values ($1, lower($2), $3, $4)
     returning id`,
    [ref, email, tokenHash, JSON.stringify(roles)],
  );
  return rows[0].id;
}

/** Whether `token` is the one whose SHA-256 is `storedHash`, in time independent of where they differ. */
function tokenMatches(token: string, storedHash: string): boolean {
  const presented = Buffer.from(sha256(token), "hex");
  const stored = Buffer.from(storedHash, "hex");
  return stored.length === presented.length && timingSafeEqual(stored, presented);
}

/**
 * Takes the project's invitation for `email` that `token` opens: deleted as it is taken, so it serves once
 * (of two acceptances at once, one gets it); an expired one is refused. Answers the roles it gives.
 */
export async function takeInvitation(
  pool: pg.Pool,
  ref: string,
  email: string,
  token: string,
): Promise<JitRole[]> {
  const { rows } = await pool.query<{ id: string; token_hash: string }>(
    "select id, token_hash from platform.jit_invites where project_ref = $1 and email = $2",
    [ref, email],
  );
  const invite = rows.find((r) => tokenMatches(token, r.token_hash));
  const { rows: taken } = invite
    ? await pool.query<{ roles: JitRole[]; expired: boolean }>(
        "delete from platform.jit_invites where id = $1 returning roles, expires_at <= now() as expired",
        [invite.id],
      )
    : { rows: [] };
  if (!taken.length) throw new HttpError(404, "No such invitation");
  if (taken[0].expired) throw new HttpError(403, "The invitation has expired: ask for a new one");
  return taken[0].roles;
}

/** Whether an invitation of the project was there to delete. */
export async function deleteInvite(pool: pg.Pool, ref: string, id: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    "delete from platform.jit_invites where project_ref = $1 and id = $2",
    [ref, id],
  );
  return Boolean(rowCount);
}
