import { spawn } from "node:child_process";
import path from "node:path";
import pg from "pg";
import { startTestServer, TEST_KEK, type TestServer } from "../../helpers/server";
import { testTempDir } from "../../helpers/tempDir";
import { mgmt } from "../client";

const PASSWORD = "a long enough password";

describe("teams without an SMTP server: links answered to the inviter, existing users, Administrators", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  const invite = (slug: string, email: string, role: string, token?: string) =>
    mgmt(server, "POST", `/v1/organizations/${slug}/members/invitations`, {
      token,
      body: { email, role_name: role },
    });
  const tokenOf = (link: string) => new URL(link).searchParams.get("token")!;
  const accept = (body: Record<string, unknown>, token: string | null = null) =>
    mgmt(server, "POST", "/v1/account/invitations/accept", { token, body });
  const signIn = async (email: string) =>
    (await mgmt(server, "POST", "/v1/account/sign-in", { token: null, body: { email, password: PASSWORD } }))
      .body.access_token as string;
  const roleIn = async (slug: string, email: string) =>
    (
      await server.controlSql(
        `select m.role_name from platform.organization_members m join platform.users u on u.id = m.user_id
           join platform.organizations o on o.id = m.organization_id where u.email = $1 and o.slug = $2`,
        [email, slug],
      )
    ).rows[0]?.role_name;

  /** A user invited to the default organization with `role`, who accepted and signed in: their session. */
  async function member(email: string, role: string): Promise<string> {
    const invited = await invite("default-org", email, role);
    expect(invited.status).toBe(201);
    expect((await accept({ token: tokenOf(invited.body.invitation_link), password: PASSWORD })).status).toBe(
      200,
    );
    return signIn(email);
  }

  it("answers the invitation link once to the inviter, and the account it opens has an unproven email", async () => {
    const invited = await invite("default-org", "reader@example.test", "Read-only");
    expect(invited.status).toBe(201);
    expect(invited.body).toMatchObject({ email: "reader@example.test", mailed: false });
    expect(invited.headers.get("cache-control")).toBe("no-store");
    const link = new URL(invited.body.invitation_link);
    expect(link.pathname).toBe("/join");
    expect(link.searchParams.get("slug")).toBe("default-org");
    const listed = await mgmt(server, "GET", "/v1/organizations/default-org/members/invitations");
    expect(listed.body).toEqual([expect.objectContaining({ id: invited.body.id, mailed: false })]);
    expect(JSON.stringify(listed.body)).not.toContain(tokenOf(invited.body.invitation_link));

    // Inviting a member again is refused; inviting the same email again replaces the earlier link.
    const again = await invite("default-org", "reader@example.test", "Developer");
    expect(again.status).toBe(201);
    const stale = await accept({ token: tokenOf(invited.body.invitation_link), password: PASSWORD });
    expect(stale.status).toBe(404);
    const accepted = await accept({
      token: tokenOf(again.body.invitation_link),
      password: PASSWORD,
      username: "Reader",
    });
    expect(accepted.status).toBe(200);
    expect(accepted.body.user).toMatchObject({ username: "Reader" });
    expect(await roleIn("default-org", "reader@example.test")).toBe("Developer");
    const user = await server.controlSql("select email_verified from platform.users where email = $1", [
      "reader@example.test",
    ]);
    expect(user.rows[0].email_verified).toBe(false);
    expect((await invite("default-org", "READER@example.test", "Owner")).status).toBe(409);
    expect((await invite("default-org", "not an email", "Owner")).status).toBe(400);
  });

  it("lets an existing user join only as themself: an invitation never sets an account's password", async () => {
    const alice = await member("alice@example.test", "Developer");
    const org = await mgmt(server, "POST", "/v1/organizations", { token: alice, body: { name: "Alice Co" } });
    expect(org.status).toBe(201);
    // Alice owns her organization and invites the installation's bootstrap admin, who has no password.
    const invited = await invite(org.body.slug, "admin@strata.local", "Developer", alice);
    expect(invited.status).toBe(201);
    const token = tokenOf(invited.body.invitation_link);

    const withoutProof = await accept({ token });
    expect(withoutProof.status).toBe(401);
    const withPassword = await accept({ token, password: "alice sets the admin password" });
    expect(withPassword.status).toBe(400);
    expect(withPassword.body.message).toBe("Invalid login credentials");
    const asAlice = await accept({ token, password: PASSWORD }, alice);
    expect(asAlice.status).toBe(403);
    const admin = await server.controlSql(
      "select password_hash, (select count(*)::int from platform.user_sessions s where s.user_id = u.id) as sessions from platform.users u where email = 'admin@strata.local'",
    );
    expect(admin.rows[0]).toEqual({ password_hash: null, sessions: 0 });
    expect(await roleIn(org.body.slug, "admin@strata.local")).toBeUndefined();
    const signIn = await mgmt(server, "POST", "/v1/account/sign-in", {
      token: null,
      body: { email: "admin@strata.local", password: "alice sets the admin password" },
    });
    expect(signIn.status).toBe(400);

    // The admin, signed in with their own token, joins.
    const joined = await accept({ token }, server.managementToken);
    expect(joined.status).toBe(200);
    expect(await roleIn(org.body.slug, "admin@strata.local")).toBe("Developer");

    // An existing user who is not signed in proves themself with their password.
    const second = await invite(org.body.slug, "reader@example.test", "Read-only", alice);
    const wrong = await accept({ token: tokenOf(second.body.invitation_link), password: "not it at all" });
    expect(wrong.status).toBe(400);
    const right = await accept({ token: tokenOf(second.body.invitation_link), password: PASSWORD });
    expect(right.status).toBe(200);
    expect(await roleIn(org.body.slug, "reader@example.test")).toBe("Read-only");
  });

  it("lets an Administrator manage every role but Owner", async () => {
    const carol = await member("carol@example.test", "Administrator");
    const adminId = (await mgmt(server, "GET", "/v1/profile")).body.authsvc_id;
    const carolId = (await mgmt(server, "GET", "/v1/profile", { token: carol })).body.authsvc_id;
    expect((await invite("default-org", "owner2@example.test", "Owner", carol)).status).toBe(403);
    const demote = await mgmt(server, "PATCH", `/v1/organizations/default-org/members/${adminId}`, {
      token: carol,
      body: { role_name: "Developer" },
    });
    expect(demote.status).toBe(403);
    expect(
      (await mgmt(server, "DELETE", `/v1/organizations/default-org/members/${adminId}`, { token: carol }))
        .status,
    ).toBe(403);
    const promote = await mgmt(server, "PATCH", `/v1/organizations/default-org/members/${carolId}`, {
      token: carol,
      body: { role_name: "Owner" },
    });
    expect(promote.status).toBe(403);
    expect(await roleIn("default-org", "admin@strata.local")).toBe("Owner");
    expect(await roleIn("default-org", "carol@example.test")).toBe("Administrator");

    // What an Administrator may: invite a Developer, revoke the invitation (its link stops working).
    const invited = await invite("default-org", "dan@example.test", "Developer", carol);
    expect(invited.status).toBe(201);
    const ownerInvite = await invite("default-org", "erin@example.test", "Owner");
    expect(
      (
        await mgmt(
          server,
          "DELETE",
          `/v1/organizations/default-org/members/invitations/${ownerInvite.body.id}`,
          {
            token: carol,
          },
        )
      ).status,
    ).toBe(403);
    const revoked = await mgmt(
      server,
      "DELETE",
      `/v1/organizations/default-org/members/invitations/${invited.body.id}`,
      {
        token: carol,
      },
    );
    expect(revoked.status).toBe(200);
    expect((await accept({ token: tokenOf(invited.body.invitation_link), password: PASSWORD })).status).toBe(
      404,
    );
    expect(
      (await server.controlSql("select 1 from platform.users where email = 'dan@example.test'")).rowCount,
    ).toBe(0);
    // An id that names no invitation of the organization: 404.
    expect(
      (await mgmt(server, "DELETE", `/v1/organizations/default-org/members/invitations/not-a-uuid`)).status,
    ).toBe(404);
  });

  it("ends a removed member's just-in-time database logins", async () => {
    const dana = await member("dana@example.test", "Developer");
    const danaId = (await mgmt(server, "GET", "/v1/profile", { token: dana })).body.authsvc_id;
    const base = `/v1/projects/${server.ref}`;
    expect((await mgmt(server, "PUT", `${base}/jit-access`, { body: { state: "enabled" } })).status).toBe(
      200,
    );
    const mapped = await mgmt(server, "PUT", `${base}/database/jit`, {
      body: { user_id: danaId, roles: [{ role: "postgres" }] },
    });
    expect(mapped.status).toBe(200);
    const login = await mgmt(server, "POST", `${base}/database/jit`, {
      token: dana,
      body: { role: "postgres", rhost: "127.0.0.1" },
    });
    expect(login.status).toBe(200);
    const connect = async () => {
      const url = new URL(server.dbUrl);
      url.username = login.body.db_user;
      url.password = login.body.db_password;
      const client = new pg.Client({ connectionString: url.toString() });
      client.on("error", () => {});
      try {
        await client.connect();
        return "connected";
      } catch (e) {
        return (e as Error).message;
      } finally {
        await client.end().catch(() => {});
      }
    };
    expect(await connect()).toBe("connected");

    expect((await mgmt(server, "DELETE", `/v1/organizations/default-org/members/${danaId}`)).status).toBe(
      200,
    );
    expect(
      (await server.sql("select 1 from pg_roles where rolname = $1", [login.body.db_user])).rowCount,
    ).toBe(0);
    expect(
      (await server.controlSql("select 1 from platform.jit_grants where user_id = $1", [danaId])).rowCount,
    ).toBe(0);
    expect(await connect()).not.toBe("connected");
  });

  it("sets a user's password from the command line, which ends their sessions", async () => {
    const run = (args: string[], input: string) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(
          path.resolve("node_modules/.bin/node"),
          ["--import", "tsx", "src/cli/main.ts", ...args],
          {
            env: {
              ...process.env,
              DATABASE_URL: server.dbUrl,
              STRATA_DATA_DIR: testTempDir("strata-cli-"),
              AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
              STRATA_KEK: TEST_KEK,
            },
          },
        );
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (c) => (stdout += c));
        child.stderr.on("data", (c) => (stderr += c));
        child.on("close", (code) => resolve({ code, stdout, stderr }));
        child.stdin.end(input);
      });
    const set = await run(["user", "password", "admin@strata.local"], "the operator's own password\n");
    expect(set).toMatchObject({ code: 0, stdout: "Password of admin@strata.local set.\n" });
    const signedIn = await mgmt(server, "POST", "/v1/account/sign-in", {
      token: null,
      body: { email: "admin@strata.local", password: "the operator's own password" },
    });
    expect(signedIn.status).toBe(200);
    const session = signedIn.body.access_token;
    expect((await mgmt(server, "GET", "/v1/profile", { token: session })).body.primary_email).toBe(
      "admin@strata.local",
    );
    expect((await run(["user", "password", "admin@strata.local"], "short\n")).code).toBe(1);
    expect((await run(["user", "password", "nobody@example.test"], "long enough password\n")).stderr).toMatch(
      /No user nobody@example.test/,
    );
    expect((await run(["user", "password", "admin@strata.local"], "another operator password\n")).code).toBe(
      0,
    );
    expect((await mgmt(server, "GET", "/v1/profile", { token: session })).status).toBe(401);
  }, 240_000); // four runs of the command line, each compiled by tsx: about 15 s apiece on a loaded 2-core machine
});
