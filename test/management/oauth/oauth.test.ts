import { createHash, randomBytes } from "node:crypto";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

const REDIRECT = "https://app.example.test/callback";
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

/** The user authorises the application with their personal access token; answers the code. */
async function authorize(
  server: TestServer,
  clientId: string,
  params: Record<string, string>,
): Promise<{ status: number; location: URL | null; body: any }> {
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: REDIRECT,
    response_type: "code",
    ...params,
  });
  const res = await fetch(`${server.url}/v1/oauth/authorize?${query}`, {
    headers: { authorization: `Bearer ${server.managementToken}` },
    redirect: "manual",
  });
  const location = res.headers.get("location");
  const text = await res.text();
  return {
    status: res.status,
    location: location ? new URL(location) : null,
    body: text ? JSON.parse(text) : null,
  };
}

async function token(
  server: TestServer,
  form: Record<string, string>,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}/v1/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(form).toString(),
  });
  return { status: res.status, body: await res.json() };
}

describe("the OAuth 2.0 authorization server", () => {
  let server: TestServer;
  let app: { client_id: string; client_secret: string };
  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
    const created = await mgmt(server, "POST", "/v1/organizations/default-org/oauth/apps", {
      body: { name: "ci tool", redirect_uris: [REDIRECT], scopes: ["projects:read", "database:read"] },
    });
    expect(created.status).toBe(201);
    app = created.body;
  });
  afterAll(() => server.stop());

  /** Authorisation code with PKCE, exchanged for tokens. */
  async function signIn(): Promise<{ access_token: string; refresh_token: string }> {
    const { verifier, challenge } = pkce();
    const auth = await authorize(server, app.client_id, {
      scope: "projects:read database:read",
      state: "st-1",
      code_challenge: challenge,
      code_challenge_method: "S256",
    });
    expect(auth.status).toBe(302);
    expect(auth.location!.origin + auth.location!.pathname).toBe(REDIRECT);
    expect(auth.location!.searchParams.get("state")).toBe("st-1");
    const code = auth.location!.searchParams.get("code")!;
    const exchanged = await token(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_id: app.client_id,
      client_secret: app.client_secret,
    });
    expect(exchanged.status).toBe(200);
    expect(exchanged.body).toMatchObject({ token_type: "Bearer", expires_in: 3600 });
    // A code is good for one exchange.
    const again = await token(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_id: app.client_id,
      client_secret: app.client_secret,
    });
    expect(again.status).toBe(400);
    expect(again.body).toMatchObject({ error: "invalid_grant", message: expect.any(String) });
    return exchanged.body;
  }

  it("issues scoped tokens with PKCE that read but cannot write, rotates refresh tokens, and revokes", async () => {
    const tokens = await signIn();
    // Stored hashed only.
    const stored = await server.controlSql(
      "select scopes, token_hash from platform.access_tokens where token_hash = any($1)",
      [[sha256(tokens.access_token), tokens.access_token]],
    );
    expect(stored.rows).toEqual([
      { scopes: ["projects:read", "database:read"], token_hash: sha256(tokens.access_token) },
    ]);
    const refreshRows = await server.controlSql("select token_hash from platform.oauth_refresh_tokens");
    expect(refreshRows.rows.map((r) => r.token_hash)).toContain(sha256(tokens.refresh_token));
    expect(refreshRows.rows.map((r) => r.token_hash)).not.toContain(tokens.refresh_token);

    const as = { token: tokens.access_token };
    const projects = await mgmt(server, "GET", "/v1/projects", as);
    expect(projects.status).toBe(200);
    expect(projects.body.map((p: any) => p.ref)).toContain(server.ref);
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}/database/migrations`, as)).status).toBe(
      200,
    );
    // What its scopes exclude is refused.
    const write = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, {
      ...as,
      body: { query: "create table public.oauth_was_here (id int)" },
    });
    expect(write.status).toBe(403);
    expect(
      (await mgmt(server, "PATCH", `/v1/projects/${server.ref}`, { ...as, body: { name: "x" } })).status,
    ).toBe(403);
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}/secrets`, as)).status).toBe(403);
    expect((await server.sql("select to_regclass('public.oauth_was_here') as t")).rows[0].t).toBeNull();

    // Refresh: a new pair; the old access token ends, and the spent refresh token replayed ends the grant.
    const refreshed = await token(server, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: app.client_id,
      client_secret: app.client_secret,
    });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(tokens.refresh_token);
    expect((await mgmt(server, "GET", "/v1/projects", as)).status).toBe(401);
    const next = { token: refreshed.body.access_token };
    expect((await mgmt(server, "GET", "/v1/projects", next)).status).toBe(200);
    const replay = await token(server, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: app.client_id,
      client_secret: app.client_secret,
    });
    expect(replay.status).toBe(400);
    expect((await mgmt(server, "GET", "/v1/projects", next)).status).toBe(401);

    // Revocation ends the grant's tokens.
    const second = await signIn();
    expect((await mgmt(server, "GET", "/v1/projects", { token: second.access_token })).status).toBe(200);
    const revoked = await fetch(`${server.url}/v1/oauth/revoke`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_id: app.client_id,
        client_secret: app.client_secret,
        refresh_token: second.refresh_token,
      }),
    });
    expect(revoked.status).toBe(204);
    expect((await mgmt(server, "GET", "/v1/projects", { token: second.access_token })).status).toBe(401);
    const afterRevoke = await token(server, {
      grant_type: "refresh_token",
      refresh_token: second.refresh_token,
      client_id: app.client_id,
      client_secret: app.client_secret,
    });
    expect(afterRevoke.status).toBe(400);
  });

  it("refuses bad requests with 4xx in the Management API's format", async () => {
    const { challenge } = pkce();
    const wrongVerifier = await authorize(server, app.client_id, {
      code_challenge: challenge,
      code_challenge_method: "S256",
    });
    const code = wrongVerifier.location!.searchParams.get("code")!;
    const bad = [
      (
        await token(server, {
          grant_type: "authorization_code",
          code,
          code_verifier: pkce().verifier,
          redirect_uri: REDIRECT,
          client_id: app.client_id,
          client_secret: app.client_secret,
        })
      ).status,
      (await token(server, { grant_type: "password", client_id: app.client_id })).status,
      (
        await token(server, {
          grant_type: "authorization_code",
          code: "x",
          client_id: app.client_id,
          client_secret: "wrong",
        })
      ).status,
      (await authorize(server, "no-such-client", {})).status,
      (await authorize(server, app.client_id, { scope: "database:write" })).status,
      (await authorize(server, app.client_id, { response_type: "token" })).status,
      (
        await mgmt(server, "POST", "/v1/oauth/revoke", {
          token: null,
          body: { client_id: app.client_id, client_secret: "wrong", refresh_token: "x" },
        })
      ).status,
      (
        await mgmt(server, "POST", "/v1/organizations/default-org/oauth/apps", {
          body: { name: "x", redirect_uris: [REDIRECT], scopes: ["everything"] },
        })
      ).status,
    ];
    // A scope the application was not registered for goes back to the application as invalid_scope.
    expect(bad).toEqual([400, 400, 400, 400, 302, 400, 401, 400]);
    const scoped = await authorize(server, app.client_id, { scope: "database:write" });
    expect(scoped.location!.searchParams.get("error")).toBe("invalid_scope");

    // Only a personal access token authorises applications; tokens of an application cannot.
    const tokens = await (async () => {
      const p = pkce();
      const a = await authorize(server, app.client_id, {
        code_challenge: p.challenge,
        code_challenge_method: "S256",
      });
      return (
        await token(server, {
          grant_type: "authorization_code",
          code: a.location!.searchParams.get("code")!,
          code_verifier: p.verifier,
          redirect_uri: REDIRECT,
          client_id: app.client_id,
          client_secret: app.client_secret,
        })
      ).body;
    })();
    const res = await fetch(
      `${server.url}/v1/oauth/authorize?${new URLSearchParams({ client_id: app.client_id, redirect_uri: REDIRECT, response_type: "code" })}`,
      { headers: { authorization: `Bearer ${tokens.access_token}` }, redirect: "manual" },
    );
    expect(res.status).toBe(403);
    expect(((await res.json()) as any).message).toEqual(expect.any(String));
  });

  it("binds a token to the organization the user chose", async () => {
    const other = await mgmt(server, "POST", "/v1/organizations", { body: { name: "Other org" } });
    expect(other.status).toBe(201);
    // An application registered without scopes may ask for all of them.
    const all = (
      await mgmt(server, "POST", "/v1/organizations/default-org/oauth/apps", {
        body: { name: "all scopes", redirect_uris: [REDIRECT] },
      })
    ).body;
    expect(all.scopes).toContain("organizations:read");
    // Two organizations: the user must name one.
    expect((await authorize(server, all.client_id, {})).status).toBe(400);
    const p = pkce();
    const a = await authorize(server, all.client_id, {
      organization_slug: "default-org",
      code_challenge: p.challenge,
      code_challenge_method: "S256",
    });
    const tokens = (
      await token(server, {
        grant_type: "authorization_code",
        code: a.location!.searchParams.get("code")!,
        code_verifier: p.verifier,
        redirect_uri: REDIRECT,
        client_id: all.client_id,
        client_secret: all.client_secret,
      })
    ).body;
    const as = { token: tokens.access_token };
    const orgs = await mgmt(server, "GET", "/v1/organizations", as);
    expect(orgs.body.map((o: any) => o.slug)).toEqual(["default-org"]);
    expect((await mgmt(server, "GET", `/v1/organizations/${other.body.slug}`, as)).status).toBe(404);
    expect((await mgmt(server, "GET", `/v1/organizations/${other.body.slug}`)).status).toBe(200);
  });
});
