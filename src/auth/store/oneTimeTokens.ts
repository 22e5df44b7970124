import type pg from "pg";

/** The tokens sent to users by mail or SMS, one per user and kind (`auth.one_time_tokens`), by their hash. */

type Db = pg.Pool | pg.PoolClient;

/** Records the token of a kind sent to `relatesTo` (an address or number), replacing the one before. */
export async function saveOneTimeToken(
  db: Db,
  token: { userId: string; type: string; hash: string; relatesTo: string },
): Promise<void> {
  await db.query(
    `insert into auth.one_time_tokens (user_id, token_type, token_hash, relates_to)
     values ($1, $2, $3, $4)
     on conflict (user_id, token_type) do update
       set token_hash = excluded.token_hash, relates_to = excluded.relates_to, updated_at = now()`,
    [token.userId, token.type, token.hash, token.relatesTo],
  );
}

export async function deleteOneTimeTokens(db: Db, userId: string): Promise<void> {
  await db.query("delete from auth.one_time_tokens where user_id = $1", [userId]);
}

export async function deleteOneTimeToken(db: Db, userId: string, type: string): Promise<void> {
  await db.query("delete from auth.one_time_tokens where user_id = $1 and token_type = $2", [userId, type]);
}

/** Both tokens of an email change (to the current and to the new address). */
export async function deleteEmailChangeTokens(db: Db, userId: string): Promise<void> {
  await db.query(
    "delete from auth.one_time_tokens where user_id = $1 and token_type::text like 'email_change%'",
    [userId],
  );
}
