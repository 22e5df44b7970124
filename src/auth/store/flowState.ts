import { randomUUID } from "node:crypto";
import type pg from "pg";

/**
 * PKCE flows (`auth.flow_state`): started with the client's code challenge, given an auth code once the user
 * has signed in, and exchanged once for a session.
 */

type Db = pg.Pool | pg.PoolClient;

/** Starts a flow (of a known user, or of one the provider will name) and answers its id. */
export async function startFlow(
  db: Db,
  flow: {
    userId?: string;
    challenge: string;
    challengeMethod: string;
    providerType: string;
    authenticationMethod: string;
  },
): Promise<string> {
  const { rows } = await db.query(
    `insert into auth.flow_state (user_id, auth_code, code_challenge_method, code_challenge, provider_type,
                                  authentication_method)
     values ($1, $2, $3, $4, $5, $6) returning id`,
    [
      flow.userId ?? null,
      randomUUID(),
      flow.challengeMethod,
      flow.challenge,
      flow.providerType,
      flow.authenticationMethod,
    ],
  );
  return rows[0].id;
}

export interface IssuedFlow {
  id: string;
  user_id: string;
  code_challenge: string;
  code_challenge_method: string;
  authentication_method: string;
  provider_access_token: string | null;
  provider_refresh_token: string | null;
  /** Seconds since its auth code was issued. */
  age: string;
}

/** The flow whose issued auth code is `code`, locked for the exchange. */
export async function flowByAuthCode(db: Db, code: string): Promise<IssuedFlow | undefined> {
  const { rows } = await db.query(
    `select *, extract(epoch from now() - auth_code_issued_at) as age
       from auth.flow_state where auth_code = $1 and auth_code_issued_at is not null for update`,
    [code],
  );
  return rows[0];
}

export async function deleteFlow(db: Db, id: string): Promise<void> {
  await db.query("delete from auth.flow_state where id = $1", [id]);
}

/** Issues the auth code of the user's latest flow started by a mail of `method` (a verified link). */
export async function issueLatestAuthCode(
  db: Db,
  userId: string,
  method: string,
): Promise<string | undefined> {
  const { rows } = await db.query(
    `update auth.flow_state set auth_code_issued_at = now(), updated_at = now()
      where id = (select id from auth.flow_state where user_id = $1 and authentication_method = $2
                   order by created_at desc limit 1)
      returning auth_code`,
    [userId, method],
  );
  return rows[0]?.auth_code;
}

/**
 * Issues a flow's auth code for the user the provider signed in; with `unclaimed`, only if no user has
 * claimed the flow yet. Undefined when there is no such flow.
 */
export async function issueAuthCode(
  db: Db,
  flowId: string,
  userId: string,
  options: { unclaimed?: boolean } = {},
): Promise<string | undefined> {
  const { rows } = await db.query(
    `update auth.flow_state set user_id = $2, auth_code_issued_at = now(), updated_at = now()
      where id = $1 and ($3::boolean is not true or user_id is null) returning auth_code`,
    [flowId, userId, Boolean(options.unclaimed)],
  );
  return rows[0]?.auth_code;
}

/** Keeps the provider's tokens of an OAuth flow until its auth code is exchanged (answered then). */
export async function saveProviderTokens(
  db: Db,
  flowId: string,
  tokens: { access: string; refresh: string | null },
): Promise<void> {
  await db.query(
    "update auth.flow_state set provider_access_token = $2, provider_refresh_token = $3 where id = $1",
    [flowId, tokens.access, tokens.refresh],
  );
}
