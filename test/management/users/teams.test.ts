import { sha256 } from "../../../src/platform/ids";
import { startMailbox } from "../../auth/mailbox";
import { startTestServer, type TestServer } from "../../helpers/server";
import { mgmt } from "../client";

const SMTP = { user: "strata-operator", pass: "operator-smtp-secret-4711" };
const INVITEE = "dev.person@example.test";
const PASSWORD = "correct horse battery staple";

/** Signs in with email and password: the reply (its body carries the session token). */
function signIn(server: TestServer, email: string, password: string) {
  return mgmt(server, "POST", "/v1/account/sign-in", { token: null, body: { email, password } });
}

describe("teams: an invited user signs in and acts with the role the organization gives", () => {
  let server: TestServer;
  let mailbox: Awaited<ReturnType<typeof startMailbox>>;
  let userId: string;
  let session: string;
  /** An organization the invitee is not a member of. */
  let otherOrg: string;
  const restConfig = () => `/v1/projects/${server.ref}/postgrest`;
  const maxRows = async () =>
    (
      await server.controlSql(
        "select coalesce((select max_rows from platform.restapi_config where project_ref = $1), 1000) as n",
        [server.ref],
      )
    ).rows[0].n;
  const membership = async () =>
    (
      await server.controlSql(
        `select m.role_name from platform.organization_members m join platform.users u on u.id = m.user_id
           join platform.organizations o on o.id = m.organization_id
          where u.email = $1 and o.slug = 'default-org'`,
        [INVITEE],
      )
    ).rows[0]?.role_name;

  beforeAll(async () => {
    mailbox = await startMailbox(SMTP);
    server = await startTestServer({
      STRATA_SMTP_URL: `smtp://${SMTP.user}:${SMTP.pass}@127.0.0.1:${mailbox.port}`,
      STRATA_SMTP_SENDER: "Strata <strata@example.test>",
      STRATA_PUBLIC_URL: "https://strata.example.test",
    });
  });
  let mailboxOpen = true;
  afterAll(async () => {
    await server.stop();
    if (mailboxOpen) await mailbox.close();
  });

  it("mails an invitation that the invitee accepts with a password of their own", async () => {
    const invited = await mgmt(server, "POST", "/v1/organizations/default-org/members/invitations", {
      body: { email: "Dev.Person@Example.test", role_name: "Developer" },
    });
    expect(invited.status).toBe(201);
    expect(invited.body).toMatchObject({ email: INVITEE, role_name: "Developer", mailed: true });
    // The link went by mail only.
    expect(invited.body).not.toHaveProperty("invitation_link");

    const mail = await mailbox.next(INVITEE);
    expect(mail.authUser).toBe(SMTP.user);
    expect(mail.from).toEqual({ address: "strata@example.test", name: "Strata" });
    expect(mail.subject).toBe("You have been invited to join Default Organization");
    expect(mail.html).toContain("Developer");
    const link = new URL(mail.link!);
    expect(link.origin + link.pathname).toBe("https://strata.example.test/join");
    const token = link.searchParams.get("token")!;
    // Without the dashboard's page, the mail also names the API call that accepts.
    expect(mail.html).toContain(
      `POST https://strata.example.test/v1/account/invitations/accept</code> with <code>{"token": "${token}"`,
    );
    // Second channel: the control plane keeps only the token's hash.
    const stored = await server.controlSql(
      "select token_hash, mailed from platform.organization_invitations where email = $1",
      [INVITEE],
    );
    expect(stored.rows).toEqual([{ token_hash: sha256(token), mailed: true }]);

    // The listing shows the invitation, never its token.
    const listed = await mgmt(server, "GET", "/v1/organizations/default-org/members/invitations");
    expect(listed.body).toEqual([expect.objectContaining({ email: INVITEE, role_name: "Developer" })]);
    expect(JSON.stringify(listed.body)).not.toContain(token);

    // A new account needs a password, long enough; a failed acceptance leaves the invitation usable.
    for (const body of [{ token }, { token, password: "short" }]) {
      const refused = await mgmt(server, "POST", "/v1/account/invitations/accept", { token: null, body });
      expect(refused.status).toBe(400);
      expect(refused.body.message).toMatch(/password/);
    }
    const wrongToken = await mgmt(server, "POST", "/v1/account/invitations/accept", {
      token: null,
      body: { token: token + "x", password: PASSWORD },
    });
    expect(wrongToken.status).toBe(404);

    const accepted = await mgmt(server, "POST", "/v1/account/invitations/accept", {
      token: null,
      body: { token, password: PASSWORD },
    });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({
      organization: { slug: "default-org" },
      role_name: "Developer",
      user: { email: INVITEE, username: "dev.person" },
    });
    userId = accepted.body.user.id;
    // The invitation served once.
    const again = await mgmt(server, "POST", "/v1/account/invitations/accept", {
      token: null,
      body: { token, password: "another password" },
    });
    expect(again.status).toBe(404);

    const user = await server.controlSql(
      "select password_hash, email_verified, is_installation_admin from platform.users where id = $1",
      [userId],
    );
    expect(user.rows[0].password_hash).toMatch(/^\$2[aby]\$10\$/);
    expect(user.rows[0].password_hash).not.toContain(PASSWORD);
    expect(user.rows[0]).toMatchObject({ email_verified: true, is_installation_admin: false });
    expect(await membership()).toBe("Developer");
    expect(
      (await server.controlSql("select count(*)::int as n from platform.organization_invitations")).rows[0].n,
    ).toBe(0);
  });

  it("writes an organization's name into the mail as text, on one subject line", async () => {
    const org = await mgmt(server, "POST", "/v1/organizations", {
      body: { name: 'Evil <a href="https://evil.test">Co</a>\r\nBcc: spy@evil.test' },
    });
    expect(org.status).toBe(201);
    otherOrg = org.body.slug;
    const invited = await mgmt(server, "POST", `/v1/organizations/${org.body.slug}/members/invitations`, {
      body: { email: "target@example.test", role_name: "Read-only" },
    });
    expect(invited.status).toBe(201);
    const mail = await mailbox.next("target@example.test");
    expect(mail.to).toEqual(["target@example.test"]);
    expect(mailbox.countFor("spy@evil.test")).toBe(0);
    expect(mail.subject).toBe(
      'You have been invited to join Evil <a href="https://evil.test">Co</a> Bcc: spy@evil.test',
    );
    expect(mail.html).toContain("Evil &lt;a href=");
    // The only link is the invitation's.
    expect(mail.link).toMatch(/^https:\/\/strata\.example\.test\/join\?token=/);
    expect(mail.html.match(/<a /g)).toHaveLength(1);
  });

  it("signs in with email and password to a session that acts as the user", async () => {
    const signedIn = await signIn(server, "DEV.person@example.test", PASSWORD);
    expect(signedIn.status).toBe(200);
    expect(signedIn.body).toMatchObject({ token_type: "Bearer", user: { id: userId, email: INVITEE } });
    session = signedIn.body.access_token;
    expect(signedIn.headers.get("cache-control")).toBe("no-store");
    // Second channel: the session row holds the token's hash, nothing of the token itself.
    const rows = await server.controlSql("select * from platform.user_sessions where user_id = $1", [userId]);
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0].token_hash).toBe(sha256(session));
    expect(JSON.stringify(rows.rows)).not.toContain(session);

    const profile = await mgmt(server, "GET", "/v1/profile", { token: session });
    expect(profile.body).toMatchObject({
      authsvc_id: userId,
      primary_email: INVITEE,
      username: "dev.person",
    });
    const organizations = await mgmt(server, "GET", "/v1/organizations", { token: session });
    expect(organizations.body.map((o: any) => o.slug)).toEqual(["default-org"]);
    const projects = await mgmt(server, "GET", "/v1/organizations/default-org/projects", { token: session });
    expect(projects.status).toBe(200);
    expect(projects.body.projects.map((p: any) => p.ref)).toEqual([server.ref]);
    expect(
      (await mgmt(server, "GET", "/v1/projects", { token: session })).body.map((p: any) => p.ref),
    ).toEqual([server.ref]);
    const members = await mgmt(server, "GET", "/v1/organizations/default-org/members", { token: session });
    expect(members.body.map((m: any) => [m.email, m.role_name]).sort()).toEqual([
      ["admin@strata.local", "Owner"],
      [INVITEE, "Developer"],
    ]);
    // Another organization answers as one that does not exist: 404, nothing of it.
    for (const path of ["", "/members", "/projects", "/members/invitations"]) {
      const other = await mgmt(server, "GET", `/v1/organizations/${otherOrg}${path}`, { token: session });
      const missing = await mgmt(server, "GET", `/v1/organizations/no-such-org${path}`, { token: session });
      expect([other.status, missing.status]).toEqual([404, 404]);
      expect(JSON.stringify(other.body)).not.toContain("target@example.test");
    }
    expect((await mgmt(server, "GET", `/v1/organizations/${otherOrg}`)).status).toBe(200);
  });

  it("gives a Developer what the role allows and refuses what it does not", async () => {
    const changed = await mgmt(server, "PATCH", restConfig(), { token: session, body: { max_rows: 321 } });
    expect(changed.status).toBe(200);
    expect(await maxRows()).toBe(321);

    const deleted = await mgmt(server, "DELETE", `/v1/projects/${server.ref}`, { token: session });
    expect(deleted.status).toBe(403);
    expect(deleted.body.message).toMatch(/Developer/);
    expect(
      (await server.controlSql("select 1 from platform.projects where ref = $1", [server.ref])).rowCount,
    ).toBe(1);
    const promoted = await mgmt(server, "PATCH", `/v1/organizations/default-org/members/${userId}`, {
      token: session,
      body: { role_name: "Owner" },
    });
    expect(promoted.status).toBe(403);
    const invited = await mgmt(server, "POST", "/v1/organizations/default-org/members/invitations", {
      token: session,
      body: { email: "friend@example.test", role_name: "Developer" },
    });
    expect(invited.status).toBe(403);
    const created = await mgmt(server, "POST", "/v1/projects", {
      token: session,
      body: { name: "mine", organization_slug: "default-org", db_pass: "a-password-1234" },
    });
    expect(created.status).toBe(403);
    expect(await membership()).toBe("Developer");
    expect(mailbox.countFor("friend@example.test")).toBe(0);
    expect(
      (
        await server.controlSql(
          "select 1 from platform.organization_invitations where email = 'friend@example.test'",
        )
      ).rowCount,
    ).toBe(0);
    // A session is not an installation administrator's: cluster-wide settings stay refused.
    const cluster = await mgmt(server, "PUT", `/v1/projects/${server.ref}/config/database/postgres`, {
      token: session,
      body: { max_connections: 120 },
    });
    expect(cluster.status).toBe(403);
  });

  it("lets the user make a personal access token with the session, and use and delete it", async () => {
    const made = await mgmt(server, "POST", "/v1/profile/access-tokens", {
      token: session,
      body: { name: "cli on my laptop" },
    });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({
      name: "cli on my laptop",
      permissions: null,
      token: expect.stringMatching(/^sbp_/),
    });
    const pat = made.body.token;
    expect(made.body.token_alias).toBe(pat.slice(0, 8));
    const stored = await server.controlSql(
      "select token_hash, user_id from platform.access_tokens where id = $1",
      [made.body.id],
    );
    expect(stored.rows).toEqual([{ token_hash: sha256(pat), user_id: userId }]);

    expect((await mgmt(server, "GET", "/v1/profile", { token: pat })).body.primary_email).toBe(INVITEE);
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}`, { token: pat })).status).toBe(200);
    const listed = await mgmt(server, "GET", "/v1/profile/access-tokens", { token: pat });
    expect(listed.body.map((t: any) => t.id)).toEqual([made.body.id]);
    expect(JSON.stringify(listed.body)).not.toContain(pat);
    // The admin's tokens are not the user's to see or delete.
    const adminTokens = await mgmt(server, "GET", "/v1/profile/access-tokens");
    expect(adminTokens.body.map((t: any) => t.id)).not.toContain(made.body.id);
    const adminToken = adminTokens.body[0].id;
    expect(
      (await mgmt(server, "DELETE", `/v1/profile/access-tokens/${adminToken}`, { token: pat })).status,
    ).toBe(404);
    expect(
      (await server.controlSql("select 1 from platform.access_tokens where id = $1", [adminToken])).rowCount,
    ).toBe(1);

    // A fine-grained token made by the user acts with its permissions only, and makes no tokens itself.
    const narrow = await mgmt(server, "POST", "/v1/profile/access-tokens", {
      token: session,
      body: { name: "read projects", permissions: ["projects_read"] },
    });
    expect(narrow.status).toBe(201);
    expect((await mgmt(server, "GET", "/v1/projects", { token: narrow.body.token })).status).toBe(200);
    expect((await mgmt(server, "GET", "/v1/organizations", { token: narrow.body.token })).status).toBe(403);
    const escalate = await mgmt(server, "POST", "/v1/profile/access-tokens", {
      token: narrow.body.token,
      body: { name: "everything" },
    });
    expect(escalate.status).toBe(403);
    expect(
      (await mgmt(server, "DELETE", `/v1/profile/access-tokens/${narrow.body.id}`, { token: session }))
        .status,
    ).toBe(200);
    expect((await mgmt(server, "GET", "/v1/projects", { token: narrow.body.token })).status).toBe(401);

    const bad = await mgmt(server, "POST", "/v1/profile/access-tokens", {
      token: session,
      body: { name: "x", permissions: ["make_coffee"] },
    });
    expect(bad.status).toBe(400);
  });

  it("applies a role change at once: a Read-only member's writes are refused", async () => {
    const changed = await mgmt(server, "PATCH", `/v1/organizations/default-org/members/${userId}`, {
      body: { role_name: "Read-only" },
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ user_id: userId, email: INVITEE, role_name: "Read-only" });
    expect(await membership()).toBe("Read-only");

    const refused = await mgmt(server, "PATCH", restConfig(), { token: session, body: { max_rows: 555 } });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/Read-only/);
    expect(await maxRows()).toBe(321);
    const sql = await mgmt(server, "POST", `/v1/projects/${server.ref}/database/query`, {
      token: session,
      body: { query: "create table read_only_probe (id int)" },
    });
    expect(sql.status).not.toBe(201);
    expect((await server.sql("select to_regclass('public.read_only_probe') as t")).rows[0].t).toBeNull();
    // Nor may it create or delete projects.
    const created = await mgmt(server, "POST", "/v1/projects", {
      token: session,
      body: { name: "read-only's", organization_slug: "default-org", db_pass: "a-password-1234" },
    });
    expect(created.status).toBe(403);
    const deleted = await mgmt(server, "DELETE", `/v1/projects/${server.ref}`, { token: session });
    expect(deleted.status).toBe(403);
    const projects = await server.controlSql(
      "select ref from platform.projects p join platform.organizations o on o.id = p.organization_id where o.slug = 'default-org'",
    );
    expect(projects.rows.map((r) => r.ref)).toEqual([server.ref]);
    // Reading still works.
    expect((await mgmt(server, "GET", restConfig(), { token: session })).body.max_rows).toBe(321);
    expect((await mgmt(server, "GET", `/v1/projects/${server.ref}`, { token: session })).status).toBe(200);
  });

  it("keeps the organization's last Owner and refuses unknown members and bad roles", async () => {
    const admin = (await mgmt(server, "GET", "/v1/profile")).body.authsvc_id;
    const demote = await mgmt(server, "PATCH", `/v1/organizations/default-org/members/${admin}`, {
      body: { role_name: "Administrator" },
    });
    expect(demote.status).toBe(400);
    expect(demote.body.message).toMatch(/only Owner/);
    expect((await mgmt(server, "DELETE", `/v1/organizations/default-org/members/${admin}`)).status).toBe(400);
    const bad = await mgmt(server, "PATCH", `/v1/organizations/default-org/members/${userId}`, {
      body: { role_name: "Superuser" },
    });
    expect(bad.status).toBe(400);
    expect(
      (
        await mgmt(server, "PATCH", "/v1/organizations/default-org/members/not-a-uuid", {
          body: { role_name: "Developer" },
        })
      ).status,
    ).toBe(400);
    const stranger = "00000000-0000-4000-8000-000000000000";
    expect((await mgmt(server, "DELETE", `/v1/organizations/default-org/members/${stranger}`)).status).toBe(
      404,
    );
    expect(await membership()).toBe("Read-only");
  });

  it("removes the member: the session and the user's tokens no longer reach the organization", async () => {
    const made = await mgmt(server, "POST", "/v1/profile/access-tokens", {
      token: session,
      body: { name: "kept" },
    });
    const removed = await mgmt(server, "DELETE", `/v1/organizations/default-org/members/${userId}`);
    expect(removed.status).toBe(200);
    expect(await membership()).toBeUndefined();

    for (const token of [session, made.body.token]) {
      expect((await mgmt(server, "GET", `/v1/projects/${server.ref}`, { token })).status).toBe(404);
      expect((await mgmt(server, "GET", "/v1/organizations/default-org/members", { token })).status).toBe(
        404,
      );
      expect((await mgmt(server, "GET", "/v1/projects", { token })).body).toEqual([]);
      expect((await mgmt(server, "GET", "/v1/organizations", { token })).body).toEqual([]);
      // Still the user's own: the profile answers.
      expect((await mgmt(server, "GET", "/v1/profile", { token })).body.primary_email).toBe(INVITEE);
    }
  });

  it("ends the session at sign-out", async () => {
    const other = (await signIn(server, INVITEE, PASSWORD)).body.access_token;
    const out = await mgmt(server, "POST", "/v1/account/sign-out", { token: session });
    expect(out.status).toBe(204);
    expect((await mgmt(server, "GET", "/v1/profile", { token: session })).status).toBe(401);
    expect(
      (
        await server.controlSql("select 1 from platform.user_sessions where token_hash = $1", [
          sha256(session),
        ])
      ).rowCount,
    ).toBe(0);
    // Only that session: another sign-in of the user goes on.
    expect((await mgmt(server, "GET", "/v1/profile", { token: other })).status).toBe(200);
    // Sign-out ends sessions, not access tokens.
    const pat = (
      await mgmt(server, "POST", "/v1/profile/access-tokens", { token: other, body: { name: "t" } })
    ).body.token;
    expect((await mgmt(server, "POST", "/v1/account/sign-out", { token: pat })).status).toBe(400);
    expect((await mgmt(server, "POST", "/v1/account/sign-out", { token: null })).status).toBe(401);
  });

  it("counts a session only as a bearer token, never as a cookie", async () => {
    const res = await fetch(`${server.url}/v1/account/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: INVITEE, password: PASSWORD }),
    });
    expect(res.status).toBe(200);
    // Pages of the projects are served on this origin: a cookie would act for whoever visits them.
    expect(res.headers.get("set-cookie")).toBeNull();
    const token = (await res.json()).access_token;
    for (const cookie of [`strata_session=${token}`, `sb-access-token=${token}`]) {
      const profile = await fetch(`${server.url}/v1/profile`, {
        headers: { cookie, "x-requested-with": "fetch" },
      });
      expect(profile.status).toBe(401);
    }
    expect((await mgmt(server, "GET", "/v1/profile", { token })).status).toBe(200);
    expect((await mgmt(server, "POST", "/v1/account/sign-out", { token })).status).toBe(204);
  });

  it("limits wrong passwords per email and answers them as it answers unknown emails", async () => {
    const attempt = (email: string, password: string) => signIn(server, email, password);
    const wrong = [];
    const unknown = [];
    for (let i = 0; i < 5; i++) {
      wrong.push(await attempt(INVITEE, `wrong password ${i}`));
      unknown.push(await attempt("nobody@example.test", `wrong password ${i}`));
    }
    for (const res of [...wrong, ...unknown]) {
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ message: "Invalid login credentials" });
    }
    // The sixth attempt is refused whatever the password, for a known email as for an unknown one.
    const limited = await attempt(INVITEE, PASSWORD);
    const limitedUnknown = await attempt("nobody@example.test", PASSWORD);
    for (const res of [limited, limitedUnknown]) {
      expect(res.status).toBe(429);
      expect(res.body.message).toMatch(/^Too many sign-in attempts for this email: retry in \d+ seconds$/);
    }
    expect(
      (
        await server.controlSql("select count(*)::int as n from platform.user_sessions where user_id = $1", [
          userId,
        ])
      ).rows[0].n,
    ).toBe(1);
    // Another email is not held up.
    expect((await attempt("someone.else@example.test", "x")).status).toBe(400);
    // The counters hold no email in clear.
    const keys = await server.controlSql(
      "select key from platform.rate_limits where key like 'mgmt-sign-in-email:%'",
    );
    expect(keys.rows.map((r) => r.key)).toContain(`mgmt-sign-in-email:${sha256(INVITEE)}`);
    expect(JSON.stringify(keys.rows)).not.toContain("example.test");
  });

  it("keeps no invitation when the SMTP server does not take its mail", async () => {
    await mailbox.close();
    mailboxOpen = false;
    const invited = await mgmt(server, "POST", "/v1/organizations/default-org/members/invitations", {
      body: { email: "unmailed@example.test", role_name: "Developer" },
    });
    expect(invited.status).toBe(502);
    expect(invited.body.message).toMatch(/invitation mail could not be sent/);
    expect(JSON.stringify(invited.body)).not.toContain(SMTP.pass);
    expect(
      (
        await server.controlSql(
          "select 1 from platform.organization_invitations where email = 'unmailed@example.test'",
        )
      ).rowCount,
    ).toBe(0);
  });
});
