import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import * as OTPAuth from "otpauth";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage } from "./mailbox";

/** A TOTP code of `secret` for the time step `offset` steps from now. */
function totp(secret: string, offset = 0): string {
  const generator = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) });
  return generator.generate({ timestamp: Date.now() + offset * 30_000 });
}

describe("sessions, MFA, password rules and the access token hook", () => {
  let server: TestServer;
  const client = (): SupabaseClient =>
    createClient(server.url, server.anonKey, {
      auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
  const config = (changes: Record<string, unknown>) => management(server, "PATCH", "/config/auth", changes);
  const refresh = (refreshToken: string) =>
    fetch(`${server.url}/auth/v1/token?grant_type=refresh_token`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ refresh_token: refreshToken }),
    });

  beforeAll(async () => {
    server = await startTestServer();
    await config({ rate_limit_token_refresh: 10000 });
  });
  afterAll(() => server.stop());

  it("enrolls a TOTP factor and raises the session to aal2", async () => {
    const a = client();
    const signUp = await a.auth.signUp({ email: "uwe@example.test", password: "Uwe-pass-1234" });
    expect(signUp.error).toBeNull();
    const enrolled = await a.auth.mfa.enroll({ factorType: "totp", friendlyName: "phone" });
    expect(enrolled.error).toBeNull();
    const secret = enrolled.data!.totp.secret;
    expect(enrolled.data!.totp.uri.startsWith("otpauth://totp/")).toBe(true);

    const challenge = await a.auth.mfa.challenge({ factorId: enrolled.data!.id });
    const wrong = await a.auth.mfa.verify({
      factorId: enrolled.data!.id,
      challengeId: challenge.data!.id,
      code: totp(secret, 100),
    });
    expect(wrong.error).toMatchObject({ status: 422, code: "mfa_verification_failed" });
    const verified = await a.auth.mfa.verify({
      factorId: enrolled.data!.id,
      challengeId: challenge.data!.id,
      code: totp(secret),
    });
    expect(verified.error).toBeNull();
    const claims = decodeJwt(verified.data!.access_token) as { aal: string; amr: { method: string }[] };
    expect(claims.aal).toBe("aal2");
    expect(claims.amr.map((m) => m.method).sort()).toEqual(["password", "totp"]);
    const { rows } = await server.sql("select status::text as status from auth.mfa_factors where id = $1", [
      enrolled.data!.id,
    ]);
    expect(rows[0].status).toBe("verified");

    // A new password sign-in is aal1 and may not unenroll or change the password until it verifies.
    const b = client();
    await b.auth.signInWithPassword({ email: "uwe@example.test", password: "Uwe-pass-1234" });
    const level = await b.auth.mfa.getAuthenticatorAssuranceLevel();
    expect(level.data).toMatchObject({ currentLevel: "aal1", nextLevel: "aal2" });
    expect((await b.auth.mfa.unenroll({ factorId: enrolled.data!.id })).error?.code).toBe("insufficient_aal");
    expect((await b.auth.updateUser({ password: "Uwe-new-pass-1" })).error?.code).toBe("insufficient_aal");
  });

  it("detects a reused refresh token and ends its session", async () => {
    await config({ security_refresh_token_reuse_interval: 0 });
    const a = client();
    const { data } = await a.auth.signUp({ email: "vic@example.test", password: "Vic-pass-1234" });
    const first = data.session!.refresh_token;
    const next = (await (await refresh(first)).json()) as { refresh_token: string };
    expect(next.refresh_token).not.toBe(first);
    const reused = await refresh(first);
    expect(reused.status).toBe(400);
    expect(((await reused.json()) as { error_code: string }).error_code).toBe("refresh_token_already_used");
    expect((await refresh(next.refresh_token)).status).toBe(400);
    const { rows } = await server.sql(
      "select count(*)::int as n from auth.sessions s join auth.users u on u.id = s.user_id where u.email = $1",
      ["vic@example.test"],
    );
    expect(rows[0].n).toBe(0);
    await config({ security_refresh_token_reuse_interval: 10 });
  });

  it("never signs an existing unconfirmed user in through a repeated sign-up", async () => {
    await server.sql(
      "insert into auth.users (email, encrypted_password) values ('yusuf@example.test', 'not-a-hash')",
    );
    const again = await client().auth.signUp({ email: "yusuf@example.test", password: "Attacker-pass-1" });
    expect(again.error).toMatchObject({ status: 422, code: "user_already_exists" });
    expect(again.data.session).toBeNull();
  });

  it("applies password rules live and reports weak passwords with reasons", async () => {
    await config({ password_required_characters: "abcdefghijklmnopqrstuvwxyz:0123456789" });
    const weak = await client().auth.signUp({ email: "wanda@example.test", password: "nodigitshere" });
    expect(weak.error).toMatchObject({ status: 422, code: "weak_password", reasons: ["characters"] });
    const a = client();
    expect((await a.auth.signUp({ email: "wanda@example.test", password: "digits-4-all" })).error).toBeNull();
    expect((await a.auth.updateUser({ password: "digits-4-all" })).error?.code).toBe("same_password");
    await config({ password_required_characters: "" });
  });

  it("refuses passwords of breach lists while password_hibp_enabled is on (offline list)", async () => {
    await config({ password_hibp_enabled: true });
    const leaked = await client().auth.signUp({ email: "lena@example.test", password: "qwerty123" });
    expect(leaked.error).toMatchObject({ status: 422, code: "weak_password", reasons: ["pwned"] });
    expect(leaked.error!.message).toBe(
      "Password is known to be weak and easy to guess, please choose a different one.",
    );
    expect((await server.sql("select 1 from auth.users where email = 'lena@example.test'")).rowCount).toBe(0);
    // Changing to a leaked password is refused too; an uncommon one passes.
    const lena = client();
    expect(
      (await lena.auth.signUp({ email: "lena@example.test", password: "lena-7-otter-cask" })).error,
    ).toBeNull();
    expect((await lena.auth.updateUser({ password: "Password1" })).error).toMatchObject({
      code: "weak_password",
      reasons: ["pwned"],
    });
    await config({ password_hibp_enabled: false });
    expect(
      (await client().auth.signUp({ email: "lena2@example.test", password: "qwerty123" })).error,
    ).toBeNull();
  });

  it("adds the claims of a custom access token hook while it is enabled", async () => {
    await server.sql(`create function public.add_tier(event jsonb) returns jsonb language sql stable as $$
      select jsonb_build_object('claims', (event->'claims') || jsonb_build_object('tier', 'gold',
        'method', event->>'authentication_method')) $$`);
    await config({
      hook_custom_access_token_enabled: true,
      hook_custom_access_token_uri: "pg-functions://postgres/public/add_tier",
    });
    const a = client();
    const { data } = await a.auth.signUp({ email: "xaver@example.test", password: "Xaver-pass-1234" });
    expect(decodeJwt(data.session!.access_token)).toMatchObject({ tier: "gold", method: "password" });
    const refreshed = await a.auth.refreshSession();
    expect(decodeJwt(refreshed.data.session!.access_token)).toMatchObject({
      tier: "gold",
      method: "token_refresh",
    });
    await config({ hook_custom_access_token_enabled: false });
    const plain = await a.auth.refreshSession();
    expect(decodeJwt(plain.data.session!.access_token).tier).toBeUndefined();
  });
});
