import type pg from "pg";
import { BOOTSTRAP_ADMIN_EMAIL } from "../platform/firstStart";
import { newAccessToken, sha256 } from "../platform/ids";
import { unknownPermissions } from "./permissions";
import { allRows, firstRow } from "./rows";

export class TokenError extends Error {}

/** A user's personal or fine-grained token as it is listed (never the token itself). */
export interface AccessTokenRow {
  id: string;
  name: string;
  /** The token's first characters, to tell tokens apart. */
  token_prefix: string;
  permissions: string[] | null;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
}

const COLUMNS = "id, name, token_prefix, permissions, created_at, expires_at, last_used_at";

/**
 * Creates an access token for a user: a personal token (all of the user's privileges) without `permissions`,
 * a fine-grained one with them. Only its hash is stored; the token is returned once.
 */
export async function createAccessToken(
  db: pg.Pool,
  userId: string,
  opts: { name: string; permissions?: string[]; expiresAt?: Date },
): Promise<{ token: string; row: AccessTokenRow }> {
  if (opts.permissions) {
    if (opts.permissions.length === 0) throw new TokenError("permissions needs at least one permission");
    const unknown = unknownPermissions(opts.permissions);
    if (unknown.length) throw new TokenError(`Unknown permission(s): ${unknown.join(", ")}`);
  }
  if (opts.expiresAt && opts.expiresAt.getTime() <= Date.now())
    throw new TokenError("expires_at must be in the future");
  const token = newAccessToken();
  const row = await firstRow<AccessTokenRow>(
    db,
    `insert into platform.access_tokens (user_id, name, token_hash, token_prefix, permissions, expires_at)
     select id, $2, $3, $4, $5, $6 from platform.users where id = $1 returning ${COLUMNS}`,
    [userId, opts.name, sha256(token), token.slice(0, 8), opts.permissions ?? null, opts.expiresAt ?? null],
  );
  if (!row) throw new TokenError("No such user");
  return { token, row };
}

/** The bootstrap admin's id (the command line's tokens are theirs). */
export async function bootstrapAdminId(db: pg.Pool): Promise<string> {
  const row = await firstRow<{ id: string }>(db, "select id from platform.users where email = $1", [
    BOOTSTRAP_ADMIN_EMAIL,
  ]);
  if (!row) throw new TokenError("The bootstrap admin user is missing from the control plane");
  return row.id;
}

/** The user's own tokens, personal and fine-grained (not those issued to OAuth applications). */
export async function listAccessTokens(db: pg.Pool, userId: string): Promise<AccessTokenRow[]> {
  return allRows<AccessTokenRow>(
    db,
    `select ${COLUMNS} from platform.access_tokens
      where user_id = $1 and oauth_app_id is null and scopes is null order by created_at, id`,
    [userId],
  );
}

/** Deletes one of the user's own tokens; false when they have no such token. */
export async function deleteAccessToken(db: pg.Pool, userId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `delete from platform.access_tokens
      where id = $1 and user_id = $2 and oauth_app_id is null and scopes is null`,
    [id, userId],
  );
  return rowCount === 1;
}
