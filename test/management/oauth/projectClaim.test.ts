import { createHash, randomBytes } from "node:crypto";
import { newAccessToken, sha256 } from "../../../src/platform/ids";
import { startTestServer, type TestServer } from "../../helpers/server";
import { atProjectHost, mgmt } from "../client";

const REDIRECT = "https://builder.example.test/claimed";

describe("GET /v1/oauth/authorize/project-claim", () => {
  let server: TestServer;
  let app: { client_id: string; client_secret: string };
  /** A second user, Owner of an organization of their own, who claims the application's project. */
  let claimer: { token: string; slug: string; orgId: string };

  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
    // The application belongs to the organization holding the project (as a builder app making projects).
    app = (
      await mgmt(server, "POST", "/v1/organizations/default-org/oauth/apps", {
        body: { name: "builder", redirect_uris: [REDIRECT], scopes: ["projects:read"] },
      })
    ).body;
    const { rows } = await server.controlSql(
      `with u as (insert into platform.users (email, username) values ('claimer@example.test', 'claimer') returning id),
            o as (insert into platform.organizations (name, slug) values ('Claimer', 'claimer-org') returning id)
       insert into platform.organization_members (organization_id, user_id, role_name)
       select o.id, u.id, 'Owner' from o, u returning user_id, organization_id`,
    );
    const token = newAccessToken();
    await server.controlSql(
      "insert into platform.access_tokens (user_id, name, token_hash, token_prefix) values ($1, 'claimer', $2, $3)",
      [rows[0].user_id, sha256(token), token.slice(0, 8)],
    );
    claimer = { token, slug: "claimer-org", orgId: rows[0].organization_id };
    await server.sql("create table public.kept (id int primary key); insert into public.kept values (7)");
  });
  afterAll(() => server.stop());

  const claim = async (params: Record<string, string>, token = claimer.token) => {
    const query = new URLSearchParams({
      project_ref: server.ref,
      client_id: app.client_id,
      redirect_uri: REDIRECT,
      response_type: "code",
      ...params,
    });
    const res = await fetch(`${server.url}/v1/oauth/authorize/project-claim?${query}`, {
      headers: { authorization: `Bearer ${token}` },
      redirect: "manual",
    });
    const location = res.headers.get("location");
    const text = await res.text();
    return {
      status: res.status,
      location: location ? new URL(location) : null,
      body: text ? JSON.parse(text) : null,
    };
  };
  const exchange = (form: Record<string, string>) =>
    fetch(`${server.url}/v1/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        client_id: app.client_id,
        redirect_uri: REDIRECT,
        ...form,
      }).toString(),
    }).then(async (r) => ({ status: r.status, body: await r.json() }));
  const organizationOfProject = async () =>
    (
      await server.controlSql(
        "select o.slug from platform.projects p join platform.organizations o on o.id = p.organization_id where p.ref = $1",
        [server.ref],
      )
    ).rows[0].slug;

  it("refuses callers who cannot consent and projects the application does not hold", async () => {
    const noToken = await fetch(
      `${server.url}/v1/oauth/authorize/project-claim?project_ref=${server.ref}&client_id=${app.client_id}&redirect_uri=${REDIRECT}&response_type=code`,
    );
    expect(noToken.status).toBe(401);
    // A developer of the target organization may not bring projects into it.
    await server.controlSql(
      "update platform.organization_members set role_name = 'Developer' where organization_id = $1",
      [claimer.orgId],
    );
    const developer = await claim({});
    expect(developer.status).toBe(403);
    await server.controlSql(
      "update platform.organization_members set role_name = 'Owner' where organization_id = $1",
      [claimer.orgId],
    );
    const bad = [
      await claim({ project_ref: "abcdefghijabcdefghij" }),
      await claim({ client_id: "no-such-client" }),
      await claim({ response_type: "token" }),
      // The application's own organization already holds the project.
      await claim({}, server.managementToken),
    ];
    expect(bad.map((r) => r.status)).toEqual([404, 400, 400, 400]);
    for (const r of bad) expect(typeof r.body.message).toBe("string");
    expect(await organizationOfProject()).toBe("default-org");
  });

  it("moves the project into the user's organization once the application exchanges the code", async () => {
    const verifier = randomBytes(48).toString("base64url");
    const challenge = createHash("sha256").update(verifier).digest("base64url");
    const consent = await claim({ state: "s1", code_challenge: challenge, code_challenge_method: "S256" });
    expect(consent.status).toBe(302);
    expect(consent.location!.origin + consent.location!.pathname).toBe(REDIRECT);
    expect(consent.location!.searchParams.get("state")).toBe("s1");
    const code = consent.location!.searchParams.get("code")!;
    // Consent alone moves nothing: the application has not proven its secret yet.
    expect(await organizationOfProject()).toBe("default-org");
    const wrong = await exchange({ code, code_verifier: verifier, client_secret: "wrong" });
    expect(wrong).toMatchObject({ status: 400, body: { error: "invalid_client" } });
    expect(await organizationOfProject()).toBe("default-org");

    const tokens = await exchange({ code, code_verifier: verifier, client_secret: app.client_secret });
    expect(tokens.status).toBe(200);
    expect(await organizationOfProject()).toBe(claimer.slug);
    // The project keeps its data and host; its new organization's owner reaches it, the old one no longer.
    const read = await atProjectHost(server, server.ref, "/rest/v1/kept?select=id", {
      apikey: server.anonKey,
    });
    expect(read).toMatchObject({ status: 200, body: [{ id: 7 }] });
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}`, { token: claimer.token })).status).toBe(
      200,
    );
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}`)).status).toBe(404);
    // The application's token acts in the claimer's organization, where the project now is.
    const listed = await mgmt(server, "GET", "/v1/projects", { token: tokens.body.access_token });
    expect(listed.body.map((p: any) => p.ref)).toEqual([server.ref]);
    // A code is used once.
    expect((await exchange({ code, code_verifier: verifier, client_secret: app.client_secret })).status).toBe(
      400,
    );
  });

  it("is described in /v1/openapi.json", async () => {
    const doc: any = await (await fetch(`${server.url}/v1/openapi.json`)).json();
    const op = doc.paths["/v1/oauth/authorize/project-claim"].get;
    expect(op.parameters.map((p: any) => p.name)).toEqual(
      expect.arrayContaining(["project_ref", "client_id", "redirect_uri", "response_type", "code_challenge"]),
    );
  });
});
