import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import * as OTPAuth from "otpauth";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage } from "./mailbox";

/** Waits until the next TOTP time step starts, so that the code of "now" stays valid for a while. */
async function freshStep(): Promise<void> {
  const left = 30_000 - (Date.now() % 30_000);
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 100));
}

describe("session limits and TOTP replay", () => {
  let server: TestServer;
  const client = (): SupabaseClient =>
    createClient(server.url, server.anonKey, {
      auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
  const config = async (changes: Record<string, unknown>) => {
    const res = await management(server, "PATCH", "/config/auth", changes);
    expect(res.status).toBe(200);
  };
  const sessionsOf = async (email: string) =>
    (
      await server.sql(
        `select s.id from auth.sessions s join auth.users u on u.id = s.user_id
          where u.email = $1 order by s.created_at`,
        [email],
      )
    ).rows.map((r) => r.id as string);

  beforeAll(async () => {
    server = await startTestServer();
    await config({ rate_limit_token_refresh: 10000 });
  });
  afterAll(() => server.stop());

  it("with sessions_single_per_user, a new sign-in ends the refresh of the user's older sessions", async () => {
    await config({ sessions_single_per_user: true });
    const a = client();
    expect(
      (await a.auth.signUp({ email: "sina@example.test", password: "Sina-pass-1234" })).error,
    ).toBeNull();
    expect((await a.auth.refreshSession()).error).toBeNull();

    const b = client();
    expect(
      (await b.auth.signInWithPassword({ email: "sina@example.test", password: "Sina-pass-1234" })).error,
    ).toBeNull();
    const refused = await a.auth.refreshSession();
    expect(refused.error).toMatchObject({ status: 400, code: "session_expired" });
    expect(refused.error!.message).toContain("Revoked by Newer Login");
    expect((await b.auth.refreshSession()).error).toBeNull();
    expect((await b.auth.refreshSession()).error).toBeNull();

    // Switched off, every session refreshes again.
    await config({ sessions_single_per_user: false });
    const c = client();
    await c.auth.signInWithPassword({ email: "sina@example.test", password: "Sina-pass-1234" });
    expect((await b.auth.refreshSession()).error).toBeNull();
    expect((await c.auth.refreshSession()).error).toBeNull();
    expect((await sessionsOf("sina@example.test")).length).toBe(3);
  });

  it("with sessions_tags, single-per-user applies within each tag: a newer session of another tag ends none", async () => {
    await config({ sessions_single_per_user: true, sessions_tags: "web, mobile" });
    const web = client();
    expect(
      (await web.auth.signUp({ email: "tage@example.test", password: "Tage-pass-1234" })).error,
    ).toBeNull();
    const phone = client();
    await phone.auth.signInWithPassword({ email: "tage@example.test", password: "Tage-pass-1234" });
    const [first, second] = await sessionsOf("tage@example.test");
    // The second is tagged mobile; the first has no tag and so counts as the first tag (web).
    await server.sql("update auth.sessions set tag = 'mobile' where id = $1", [second]);
    expect((await web.auth.refreshSession()).error).toBeNull();
    expect((await phone.auth.refreshSession()).error).toBeNull();
    // A newer web session ends the older web one only.
    const laptop = client();
    await laptop.auth.signInWithPassword({ email: "tage@example.test", password: "Tage-pass-1234" });
    expect((await web.auth.refreshSession()).error).toMatchObject({ code: "session_expired" });
    expect((await phone.auth.refreshSession()).error).toBeNull();
    expect((await laptop.auth.refreshSession()).error).toBeNull();
    // A tag not in the list counts as the first: the mobile session, retagged, now competes with web.
    await server.sql("update auth.sessions set tag = 'tv' where id = $1", [second]);
    expect((await phone.auth.refreshSession()).error).toMatchObject({ code: "session_expired" });
    expect(first).toBeTruthy();
    await config({ sessions_single_per_user: false, sessions_tags: "" });
  });

  it("refuses the refresh of a session past sessions_timebox or idle past sessions_inactivity_timeout", async () => {
    await config({ sessions_timebox: 3600, sessions_inactivity_timeout: 0 });
    const a = client();
    await a.auth.signUp({ email: "timo@example.test", password: "Timo-pass-1234" });
    expect((await a.auth.refreshSession()).error).toBeNull();
    const [id] = await sessionsOf("timo@example.test");
    await server.sql("update auth.sessions set created_at = now() - interval '2 hours' where id = $1", [id]);
    const old = await a.auth.refreshSession(); // auth-js drops the session it cannot refresh
    expect(old.error).toMatchObject({ status: 400, code: "session_expired" });
    expect(old.error!.message).toBe("Invalid Refresh Token: Session Expired");

    await config({ sessions_timebox: 0, sessions_inactivity_timeout: 600 });
    const b = client();
    await b.auth.signInWithPassword({ email: "timo@example.test", password: "Timo-pass-1234" });
    expect((await b.auth.refreshSession()).error).toBeNull();
    const second = (await sessionsOf("timo@example.test"))[1];
    await server.sql(
      "update auth.sessions set refreshed_at = refreshed_at - interval '15 minutes' where id = $1",
      [second],
    );
    const idle = await b.auth.refreshSession();
    expect(idle.error).toMatchObject({ status: 400, code: "session_expired" });
    expect(idle.error!.message).toContain("Inactivity");

    // Each refresh counts as activity: a session refreshed within the timeout stays.
    const c = client();
    await c.auth.signInWithPassword({ email: "timo@example.test", password: "Timo-pass-1234" });
    expect((await c.auth.refreshSession()).error).toBeNull();
    expect((await c.auth.refreshSession()).error).toBeNull();
    await config({ sessions_timebox: 0, sessions_inactivity_timeout: 0 });
  });

  it("accepts each TOTP code once: a replayed code verifies no second challenge", async () => {
    const a = client();
    await a.auth.signUp({ email: "tara@example.test", password: "Tara-pass-1234" });
    const enrolled = await a.auth.mfa.enroll({ factorType: "totp", friendlyName: "phone" });
    const factorId = enrolled.data!.id;
    const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(enrolled.data!.totp.secret) });
    await freshStep();
    const code = totp.generate();
    expect((await a.auth.mfa.challengeAndVerify({ factorId, code })).error).toBeNull();

    const b = client();
    await b.auth.signInWithPassword({ email: "tara@example.test", password: "Tara-pass-1234" });
    const replay = await b.auth.mfa.challengeAndVerify({ factorId, code });
    expect(replay.error).toMatchObject({ status: 422, code: "mfa_verification_failed" });
    expect((await b.auth.mfa.getAuthenticatorAssuranceLevel()).data?.currentLevel).toBe("aal1");

    // The code of the next step is a new one and verifies.
    const nextStep = totp.counter() + 1;
    const next = totp.generate({ timestamp: nextStep * 30_000 });
    expect((await b.auth.mfa.challengeAndVerify({ factorId, code: next })).error).toBeNull();
    const { rows } = await server.sql(
      "select last_totp_step::float8 as step from auth.mfa_factors where id = $1",
      [factorId],
    );
    expect(rows[0].step).toBe(nextStep);
  });
});
