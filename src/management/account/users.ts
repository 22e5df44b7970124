import type pg from "pg";
import { hashPassword, MAX_PASSWORD_BYTES } from "../../auth/passwords";
import { HttpError } from "../http";
import { firstRow } from "../rows";

/** The installation's users (platform.users): who signs in to the Management API and the dashboard. */

export interface UserRow {
  id: string;
  email: string;
  username: string;
  /** bcrypt; null until the user (or, for the bootstrap admin, the operator) sets a password. */
  password_hash: string | null;
}

/** Emails are kept and compared in lower case. */
export function normalEmail(email: string): string {
  return email.trim().toLowerCase();
}

export const MIN_PASSWORD_LENGTH = 8;

/** Refuses (400) a password too short, or longer than bcrypt reads (it would be cut, not checked whole). */
export function checkNewPassword(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH)
    throw new HttpError(400, `Invalid body: password: must be at least ${MIN_PASSWORD_LENGTH} characters`);
  if (Buffer.byteLength(password) > MAX_PASSWORD_BYTES)
    throw new HttpError(400, `Invalid body: password: must be at most ${MAX_PASSWORD_BYTES} bytes`);
}

export async function userByEmail(db: pg.Pool | pg.ClientBase, email: string): Promise<UserRow | undefined> {
  return firstRow<UserRow>(
    db,
    "select id, email, username, password_hash from platform.users where email = $1",
    [normalEmail(email)],
  );
}

/** Makes a user with a password (hashed here); `emailVerified` when the email was proven (a mailed link). */
export async function createUser(
  db: pg.ClientBase,
  user: { email: string; username: string; password: string; emailVerified: boolean },
): Promise<UserRow> {
  checkNewPassword(user.password);
  const made = await firstRow<UserRow>(
    db,
    `insert into platform.users (email, username, password_hash, email_verified) values ($1, $2, $3, $4)
     on conflict (email) do nothing returning id, email, username, password_hash`,
    [normalEmail(user.email), user.username, await hashPassword(user.password), user.emailVerified],
  );
  // Another acceptance for the same email made the account meanwhile: this one is now an existing user's.
  if (!made)
    throw new HttpError(409, `An account for ${user.email} was just made: accept again as that user`);
  return made;
}

export async function markEmailVerified(db: pg.ClientBase, userId: string): Promise<void> {
  await db.query("update platform.users set email_verified = true where id = $1", [userId]);
}

/**
 * Sets a user's password (the command line's `user password`) and ends the user's sessions, which the old
 * password opened; false when there is no such user.
 */
export async function setPassword(db: pg.Pool, email: string, password: string): Promise<boolean> {
  checkNewPassword(password);
  const { rowCount } = await db.query(
    `with u as (update platform.users set password_hash = $2 where email = $1 returning id),
          ended as (delete from platform.user_sessions s using u where s.user_id = u.id)
     select from u`,
    [normalEmail(email), await hashPassword(password)],
  );
  return rowCount === 1;
}
