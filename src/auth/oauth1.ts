import { createHmac } from "node:crypto";
import OAuth from "oauth-1.0a";
import type pg from "pg";
import { fetchOutbound } from "../net/outbound";
import type { ConfiguredProvider, Endpoints, ProviderTokens } from "./providerSpec";

/**
 * OAuth 1.0a sign-in (the platform's legacy Twitter provider): a request token got for Strata's callback, the
 * browser sent to authenticate it, and at the callback the verifier exchanged for an access token, which signs
 * the user API's requests. Every request is signed HMAC-SHA1 with the client's secret and the token's.
 */

/** A request token lives as long as the sign-in's state. */
const REQUEST_TOKEN_SECONDS = 600;

type Db = pg.Pool | pg.PoolClient;

const signer = (p: ConfiguredProvider) =>
  new OAuth({
    consumer: { key: p.clientId, secret: p.secret },
    signature_method: "HMAC-SHA1",
    hash_function: (base, key) => createHmac("sha1", key).update(base).digest("base64"),
  });

/** The Authorization header of a request, its `oauth_*` parameters (callback, verifier) signed with it. */
function authorization(
  p: ConfiguredProvider,
  method: string,
  url: string,
  token: OAuth.Token | undefined,
  params: Record<string, string> = {},
): string {
  const oauth = signer(p);
  return oauth.toHeader({ ...oauth.authorize({ url, method, data: params }, token), ...params })
    .Authorization;
}

/** A signed POST whose answer is a form (the request and access token endpoints). */
async function signedPost(
  p: ConfiguredProvider,
  url: string,
  token: OAuth.Token | undefined,
  params: Record<string, string>,
): Promise<Record<string, string>> {
  const res = await fetchOutbound(url, {
    method: "POST",
    headers: { authorization: authorization(p, "POST", url, token, params) },
  });
  if (res.status < 200 || res.status >= 300)
    throw new Error(`${new URL(url).pathname} answered ${res.status}`);
  const answer = Object.fromEntries(new URLSearchParams(res.text));
  if (!answer.oauth_token || !answer.oauth_token_secret) throw new Error("no token in the answer");
  return answer;
}

/**
 * The provider's authenticate URL of a sign-in whose state is `stateId`: a request token got for
 * `callbackUrl`, its secret kept until the callback.
 */
export async function requestTokenRedirect(
  db: Db,
  p: ConfiguredProvider,
  requestTokenUrl: string,
  endpoints: Endpoints,
  callbackUrl: string,
  stateId: string,
): Promise<string> {
  const answer = await signedPost(p, requestTokenUrl, undefined, { oauth_callback: callbackUrl });
  if (answer.oauth_callback_confirmed !== "true") throw new Error("callback not confirmed");
  await db.query(
    `with expired as (
       delete from auth.oauth1_request_tokens where created_at < now() - make_interval(secs => $5))
     insert into auth.oauth1_request_tokens (token, secret, provider_type, state_id) values ($1, $2, $3, $4)`,
    [answer.oauth_token, answer.oauth_token_secret, p.name, stateId, REQUEST_TOKEN_SECONDS],
  );
  const url = new URL(endpoints.authorize);
  url.searchParams.set("oauth_token", answer.oauth_token);
  return url.href;
}

/**
 * The access token for the callback's request token and verifier: only a token this sign-in's state got, not
 * expired, and used once (taken whether or not the exchange succeeds).
 */
export async function exchangeVerifier(
  db: Db,
  p: ConfiguredProvider,
  endpoints: Endpoints,
  stateId: string,
  params: Record<string, unknown>,
): Promise<ProviderTokens> {
  const { rows } = await db.query(
    `delete from auth.oauth1_request_tokens
      where token = $1 and provider_type = $2 and state_id = $3
        and created_at >= now() - make_interval(secs => $4)
      returning secret`,
    [String(params.oauth_token ?? ""), p.name, stateId, REQUEST_TOKEN_SECONDS],
  );
  if (!rows.length) throw new Error("unknown or expired request token");
  const answer = await signedPost(
    p,
    endpoints.token,
    { key: String(params.oauth_token), secret: rows[0].secret },
    { oauth_verifier: String(params.oauth_verifier ?? "") },
  );
  return { ...answer, access_token: answer.oauth_token };
}

/** GETs JSON from the provider's API, signed with the access token. */
export async function signedGet(p: ConfiguredProvider, tokens: ProviderTokens, url: string): Promise<any> {
  const token = { key: tokens.access_token, secret: String(tokens.oauth_token_secret ?? "") };
  const res = await fetchOutbound(url, { headers: { authorization: authorization(p, "GET", url, token) } });
  if (res.status < 200 || res.status >= 300)
    throw new Error(`${new URL(url).pathname} answered ${res.status}`);
  return JSON.parse(res.text);
}
