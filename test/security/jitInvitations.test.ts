import { createHash } from "node:crypto";
import { newAccessToken } from "../../src/platform/ids";
import { startTestServer, type TestServer } from "../helpers/server";
import { mgmt } from "../management/client";

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * JIT invitations (`database/jit/invite`, `.../invite/accept`): an invitation gives database roles to the one
 * member whose email it names, for the exact token answered when it was made, once, within its lifetime.
 * Members of the organization try every other way in; the control plane's rows show what they got.
 */
describe("JIT invitations", () => {
  let server: TestServer;
  let base: string;
  const invitee = { email: "invitee@example.test", token: "", id: "" };
  const other = { email: "other@example.test", token: "", id: "" };

  /** A member of the default organization with a personal access token. */
  async function member(who: typeof invitee) {
    const { rows } = await server.controlSql(
      `with u as (insert into platform.users (email, username) values ($1, $1) returning id)
       insert into platform.organization_members (organization_id, user_id, role_name)
       select o.id, u.id, 'Developer' from platform.organizations o, u where o.slug = 'default-org'
       returning user_id::text`,
      [who.email],
    );
    who.id = rows[0].user_id;
    who.token = newAccessToken();
    await server.controlSql(
      "insert into platform.access_tokens (user_id, name, token_hash, token_prefix) values ($1, 'test', $2, $3)",
      [who.id, sha256(who.token), who.token.slice(0, 8)],
    );
  }
  const invite = async (email: string) => {
    const res = await mgmt(server, "POST", `${base}/database/jit/invite`, {
      body: { email, roles: [{ role: "authenticated" }] },
    });
    expect(res.status).toBe(200);
    return res.body as { token: string; invite_id: string };
  };
  const accept = (as: typeof invitee, body: { email: string; token: string }) =>
    mgmt(server, "POST", `${base}/database/jit/invite/accept`, { token: as.token, body });
  /** Second channel: the roles the control plane maps the user to, and the invitations left. */
  const grantsOf = async (user: typeof invitee) =>
    (
      await server.controlSql("select role from platform.jit_grants where user_id = $1 order by role", [
        user.id,
      ])
    ).rows.map((r) => r.role);
  const invitationExists = async (id: string) =>
    (await server.controlSql("select 1 from platform.jit_invites where id = $1", [id])).rowCount === 1;

  beforeAll(async () => {
    server = await startTestServer({ MANAGEMENT_RATE_LIMIT: "100000" });
    base = `/v1/projects/${server.ref}`;
    await member(invitee);
    await member(other);
  });
  afterAll(() => server.stop());

  it("keeps only the token's hash, and refuses every token but the exact one", async () => {
    const { token, invite_id } = await invite(invitee.email);
    const forOther = await invite(other.email);
    const stored = await server.controlSql("select token_hash from platform.jit_invites where id = $1", [
      invite_id,
    ]);
    expect(stored.rows).toEqual([{ token_hash: sha256(token) }]);
    for (const wrong of [
      "wrong",
      token.slice(0, -1),
      `${token}x`,
      token.toUpperCase(),
      ` ${token}`,
      sha256(token),
      forOther.token,
    ]) {
      const res = await accept(invitee, { email: invitee.email, token: wrong });
      expect({ wrong, status: res.status, message: typeof res.body.message }).toEqual({
        wrong,
        status: 404,
        message: "string",
      });
    }
    expect((await accept(invitee, { email: invitee.email, token: "" })).status).toBe(400);
    expect(await grantsOf(invitee)).toEqual([]);
    expect(await invitationExists(invite_id)).toBe(true);

    // The exact token, by the invitee: the roles are theirs, and the invitation is spent.
    const accepted = await accept(invitee, { email: invitee.email.toUpperCase(), token });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toMatchObject({ user_id: invitee.id, user_roles: [{ role: "authenticated" }] });
    expect(await grantsOf(invitee)).toEqual(["authenticated"]);
    expect(await invitationExists(invite_id)).toBe(false);
    expect(await invitationExists(forOther.invite_id)).toBe(true);
  });

  it("gives an invitation to the invited member only", async () => {
    const { token, invite_id } = await invite("third@example.test");
    // Another member, naming the invited email or their own.
    expect((await accept(other, { email: "third@example.test", token })).status).toBe(403);
    expect((await accept(other, { email: other.email, token })).status).toBe(404);
    // The project's administrator who made it.
    expect(
      (
        await mgmt(server, "POST", `${base}/database/jit/invite/accept`, {
          body: { email: "third@example.test", token },
        })
      ).status,
    ).toBe(403);
    expect(await grantsOf(other)).toEqual([]);
    expect(await invitationExists(invite_id)).toBe(true);
  });

  it("serves an invitation once, even to two acceptances at the same moment", async () => {
    await server.controlSql("delete from platform.jit_grants where user_id = $1", [other.id]);
    const { token, invite_id } = await invite(other.email);
    const both = await Promise.all([
      accept(other, { email: other.email, token }),
      accept(other, { email: other.email, token }),
    ]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 404]);
    expect((await accept(other, { email: other.email, token })).status).toBe(404);
    expect(await invitationExists(invite_id)).toBe(false);
    // Spent, it gives nothing more: removed roles do not come back with it.
    expect((await mgmt(server, "DELETE", `${base}/database/jit/${other.id}`)).status).toBe(200);
    expect((await accept(other, { email: other.email, token })).status).toBe(404);
    expect(await grantsOf(other)).toEqual([]);
  });

  it("refuses an expired invitation, and lists only those still open", async () => {
    const { token, invite_id } = await invite(other.email);
    const listed = (await mgmt(server, "GET", `${base}/database/jit/list`)).body.items;
    const item = listed.find((i: { invite_id: string | null }) => i.invite_id === invite_id);
    expect(item.expires_at).toBeGreaterThan(Date.now() / 1000 + 6 * 86400);
    // Its lifetime passes (set in the control plane, as time would).
    await server.controlSql(
      "update platform.jit_invites set expires_at = now() - interval '1 second' where id = $1",
      [invite_id],
    );
    const after = (await mgmt(server, "GET", `${base}/database/jit/list`)).body.items;
    expect(after.some((i: { invite_id: string | null }) => i.invite_id === invite_id)).toBe(false);
    const res = await accept(other, { email: other.email, token });
    expect(res).toMatchObject({ status: 403, body: { message: expect.stringMatching(/expired/) } });
    expect(await grantsOf(other)).toEqual([]);
    expect((await accept(other, { email: other.email, token })).status).toBe(404);
  });
});
