import { createHash, randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type JWK, type KeyLike } from "jose";

/**
 * A local OAuth 2.0 / OpenID Connect provider for the tests, speaking any provider's endpoints by shape:
 *   - a GET with `response_type=code` is the authorize endpoint: it answers the browser at once with a code
 *     for `redirect_uri` (or, with response_mode=form_post, a JSON description of the form to post);
 *   - a POST is the token endpoint: the client's credentials (Basic, or in the body), the code's
 *     redirect_uri and (when its authorize request had a challenge) PKCE verifier checked, it answers an
 *     access and refresh token, an ID token when `idToken` is on;
 *   - `<issuer>/.well-known/openid-configuration` and `/jwks` publish the discovery document and a key made
 *     by jose, which signs the ID tokens;
 *   - every other GET answers `api[pathname]` to a bearer of an access token it gave.
 */

export interface FakeProviderOptions {
  clientId: string;
  secret: string;
  /** The provider's user API: JSON answers by path. */
  api?: Record<string, unknown>;
  /** Whether the token answer has an ID token, with these claims (iss, aud, exp, at_hash, nonce added). */
  idToken?: Record<string, unknown>;
  /** Path of the ID tokens' issuer under the server's URL (Azure's `/<tenant>/v2.0`). */
  issuerPath?: string;
  /** More members of the token answer (WorkOS's profile). */
  tokenExtra?: Record<string, unknown>;
  /** More fields of a form_post answer (Apple's `user`). */
  formExtra?: Record<string, string>;
}

export interface FakeProvider {
  url: string;
  issuer: string;
  options: FakeProviderOptions;
  /** Each authorize request's URL, in order. */
  authorizeRequests: URL[];
  /** Form of each token request, with its Authorization header. */
  tokenRequests: { form: URLSearchParams; authorization: string | undefined }[];
  /** An ID token of this provider (its key unless `key` is another's), for signInWithIdToken. */
  sign(
    claims: Record<string, unknown>,
    options?: { key?: KeyLike; expiresIn?: string | number },
  ): Promise<string>;
  otherKey: KeyLike;
  close(): Promise<void>;
}

export async function startFakeProvider(options: FakeProviderOptions): Promise<FakeProvider> {
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const other = await generateKeyPair("RS256");
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: "fake-1", alg: "RS256", use: "sig" };
  const codes = new Map<string, { redirectUri: string; nonce: string | null; challenge: string | null }>();
  const accessTokens = new Set<string>();
  const authorizeRequests: URL[] = [];
  const tokenRequests: FakeProvider["tokenRequests"] = [];
  let url = "";
  let issuer = "";

  const sign: FakeProvider["sign"] = (claims, signOptions = {}) =>
    new SignJWT({ aud: options.clientId, ...claims })
      .setProtectedHeader({ alg: "RS256", kid: "fake-1" })
      .setIssuer(String(claims.iss ?? issuer))
      .setIssuedAt()
      .setExpirationTime(signOptions.expiresIn ?? "5m")
      .sign(signOptions.key ?? privateKey);

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };

  const authorize = (res: http.ServerResponse, asked: URL) => {
    authorizeRequests.push(asked);
    const query = asked.searchParams;
    if (query.get("client_id") !== options.clientId) return json(res, 400, { error: "invalid_client" });
    const code = randomUUID();
    const redirectUri = query.get("redirect_uri")!;
    codes.set(code, { redirectUri, nonce: query.get("nonce"), challenge: query.get("code_challenge") });
    if (query.get("response_mode") === "form_post") {
      return json(res, 200, {
        form_post: redirectUri,
        fields: { ...options.formExtra, code, state: query.get("state") },
      });
    }
    const back = new URL(redirectUri);
    back.searchParams.set("code", code);
    back.searchParams.set("state", query.get("state")!);
    res.writeHead(302, { location: back.href });
    res.end();
  };

  const token = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    const form = new URLSearchParams(raw);
    tokenRequests.push({ form, authorization: req.headers.authorization });
    const basic = `Basic ${Buffer.from(`${options.clientId}:${options.secret}`).toString("base64")}`;
    const inBody = form.get("client_id") === options.clientId && form.get("client_secret") === options.secret;
    if (req.headers.authorization !== basic && !inBody) return json(res, 401, { error: "invalid_client" });
    const grant = codes.get(form.get("code") ?? "");
    if (!grant || grant.redirectUri !== form.get("redirect_uri"))
      return json(res, 400, { error: "invalid_grant" });
    codes.delete(form.get("code")!);
    // A provider's own PKCE (X): the verifier of the challenge its authorize request had.
    const verifier = form.get("code_verifier");
    if (
      grant.challenge &&
      createHash("sha256")
        .update(verifier ?? "")
        .digest("base64url") !== grant.challenge
    ) {
      return json(res, 400, { error: "invalid_grant", error_description: "code_verifier" });
    }
    const accessToken = `at-${randomUUID()}`;
    accessTokens.add(accessToken);
    const answer: Record<string, unknown> = {
      access_token: accessToken,
      refresh_token: `rt-${randomUUID()}`,
      token_type: "Bearer",
      expires_in: 3600,
      ...options.tokenExtra,
    };
    if (options.idToken) {
      const hash = createHash("sha256").update(accessToken).digest().subarray(0, 16).toString("base64url");
      answer.id_token = await sign({
        ...options.idToken,
        at_hash: hash,
        ...(grant.nonce ? { nonce: grant.nonce } : {}),
      });
    }
    json(res, 200, answer);
  };

  const server = http.createServer((req, res) => {
    const u = new URL(req.url!, url);
    if (req.method === "POST") return void token(req, res);
    if (u.searchParams.get("response_type") === "code") return authorize(res, u);
    if (u.pathname.endsWith("/.well-known/openid-configuration")) {
      const iss = `${url}${u.pathname.replace(/\/\.well-known\/openid-configuration$/, "")}`;
      return json(res, 200, {
        issuer: iss,
        authorization_endpoint: `${url}/authorize`,
        token_endpoint: `${url}/token`,
        jwks_uri: `${url}/jwks`,
      });
    }
    if (u.pathname === "/jwks") return json(res, 200, { keys: [jwk] });
    const bearer = (req.headers.authorization ?? "").replace(/^Bearer /, "");
    if (!accessTokens.has(bearer)) return json(res, 401, { error: "invalid_token" });
    const answer = options.api?.[u.pathname];
    return answer === undefined ? json(res, 404, { error: "not_found" }) : json(res, 200, answer);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  issuer = `${url}${options.issuerPath ?? ""}`;
  return {
    url,
    issuer,
    options,
    authorizeRequests,
    tokenRequests,
    sign,
    otherKey: other.privateKey,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A browser following redirects through Strata and the provider until it reaches `stopAt`; a provider's
 * form_post answer is posted to Strata's callback as the browser would.
 */
export async function follow(start: string, stopAt: string): Promise<string> {
  let url = start;
  for (let hop = 0; hop < 10 && !url.startsWith(stopAt); hop++) {
    const res = await fetch(url, { redirect: "manual" });
    const location = res.headers.get("location");
    if (location) {
      url = new URL(location, url).href;
      continue;
    }
    const body = (await res.json().catch(() => ({}))) as {
      form_post?: string;
      fields?: Record<string, string>;
    };
    if (!body.form_post) throw new Error(`${url} answered ${res.status} without a redirect`);
    const posted = await fetch(body.form_post, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(body.fields).toString(),
    });
    url = posted.headers.get("location") ?? "";
  }
  return url;
}
