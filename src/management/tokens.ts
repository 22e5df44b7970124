import type pg from "pg";
import { BOOTSTRAP_ADMIN_EMAIL } from "../platform/firstStart";
import { newAccessToken, sha256 } from "../platform/ids";
import { unknownPermissions } from "./permissions";

export class TokenError extends Error {}

/**
 * Creates an access token for the bootstrap admin: a personal token (all privileges) without `permissions`,
 * a fine-grained one with them. Only its hash is stored; the token is returned once.
 */
export async function createAccessToken(
  db: pg.Pool,
  opts: { name: string; permissions?: string[] },
): Promise<{ token: string; permissions: string[] | null }> {
  if (opts.permissions) {
    if (opts.permissions.length === 0) throw new TokenError("--permissions needs at least one permission");
    const unknown = unknownPermissions(opts.permissions);
    if (unknown.length) throw new TokenError(`Unknown permission(s): ${unknown.join(", ")}`);
  }
  const token = newAccessToken();
  const { rowCount } = await db.query(
    `insert into platform.access_tokens (user_id, name, token_hash, token_prefix, permissions)
     select id, $2, $3, $4, $5 from platform.users where email = $1`,
    [BOOTSTRAP_ADMIN_EMAIL, opts.name, sha256(token), token.slice(0, 8), opts.permissions ?? null],
  );
  if (rowCount !== 1) throw new TokenError("The bootstrap admin user is missing from the control plane");
  return { token, permissions: opts.permissions ?? null };
}
