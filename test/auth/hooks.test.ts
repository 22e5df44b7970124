import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import * as OTPAuth from "otpauth";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage } from "./mailbox";

const totp = (secret: string, offset = 0) =>
  new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret) }).generate({
    timestamp: Date.now() + offset * 30_000,
  });

/**
 * The auth hooks as pg-functions: each SQL function logs the payload it got (the second channel) and
 * decides as the platform's hook contracts say. They run as the auth service's role, which gets what the
 * platform's docs grant supabase_auth_admin.
 */
const HOOKS_SQL = `
  create table public.hook_log (id bigserial primary key, hook text not null, payload jsonb not null);
  grant usage on schema public to supabase_auth_admin;
  grant select, insert on public.hook_log to supabase_auth_admin;
  grant usage on sequence public.hook_log_id_seq to supabase_auth_admin;
  create function public.log_hook(hook text, event jsonb) returns void language sql as
    $$ insert into public.hook_log (hook, payload) values (hook, event) $$;

  -- After three failed password attempts on a user: reject the next ones and sign the user out everywhere.
  create function public.password_attempt(event jsonb) returns jsonb language plpgsql as $$
  declare failed int;
  begin
    select count(*) into failed from public.hook_log where hook = 'password'
      and payload->>'user_id' = event->>'user_id' and payload->>'valid' = 'false';
    perform public.log_hook('password', event);
    if failed >= 3 then
      return jsonb_build_object('decision', 'reject', 'message', 'Account locked', 'should_logout_user', true);
    end if;
    return jsonb_build_object('decision', 'continue');
  end $$;

  -- A wrong TOTP code is rejected at once (the platform then ends the user's sessions).
  create function public.mfa_attempt(event jsonb) returns jsonb language plpgsql as $$
  begin
    perform public.log_hook('mfa', event);
    if not (event->>'valid')::boolean then
      return jsonb_build_object('decision', 'reject');
    end if;
    return jsonb_build_object('decision', 'continue');
  end $$;

  create function public.before_created(event jsonb) returns jsonb language plpgsql as $$
  begin
    perform public.log_hook('before', event);
    if event->'user'->>'email' like '%@blocked.test' then
      return jsonb_build_object('error', jsonb_build_object('http_code', 403, 'message', 'Sign-ups from blocked.test are closed'));
    end if;
    return '{}'::jsonb;
  end $$;

  -- Mail goes to the hook, not SMTP: the function keeps it (and sees the user the request is writing).
  create function public.send_email(event jsonb) returns jsonb language plpgsql as $$
  begin
    if not exists (select 1 from auth.users where id = (event->'user'->>'id')::uuid) then
      raise exception 'user not visible';
    end if;
    perform public.log_hook('email', event);
    return '{}'::jsonb;
  end $$;

  create function public.after_created(event jsonb) returns jsonb language plpgsql as $$
  begin
    perform public.log_hook('after', event);
    return '{}'::jsonb;
  end $$;
`;

describe("auth hooks: password and MFA verification attempts, before and after user created", () => {
  let server: TestServer;
  const client = (): SupabaseClient =>
    createClient(server.url, server.anonKey, {
      auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
  const log = async (hook: string) =>
    (await server.sql("select payload from public.hook_log where hook = $1 order by id", [hook])).rows.map(
      (r) => r.payload,
    );
  const sessions = async (userId: string) =>
    (await server.sql("select count(*)::int as n from auth.sessions where user_id = $1", [userId])).rows[0].n;

  beforeAll(async () => {
    server = await startTestServer();
    await server.sql(HOOKS_SQL);
    const hook = (name: string, fn: string) => ({
      [`hook_${name}_enabled`]: true,
      [`hook_${name}_uri`]: `pg-functions://postgres/public/${fn}`,
    });
    const patched = await management(server, "PATCH", "/config/auth", {
      external_anonymous_users_enabled: true,
      ...hook("password_verification_attempt", "password_attempt"),
      ...hook("mfa_verification_attempt", "mfa_attempt"),
      ...hook("before_user_created", "before_created"),
      ...hook("after_user_created", "after_created"),
    });
    expect(patched.status).toBe(200);
  });
  afterAll(() => server.stop());

  it("asks the before-user-created hook about every new user and tells the after hook once created", async () => {
    const blocked = await client().auth.signUp({ email: "eve@blocked.test", password: "Eve-pass-1234" });
    expect(blocked.error).toMatchObject({ status: 403, message: "Sign-ups from blocked.test are closed" });
    const none = await server.sql(
      "select count(*)::int as n from auth.users where email = 'eve@blocked.test'",
    );
    expect(none.rows[0].n).toBe(0);

    const otp = await client().auth.signInWithOtp({ email: "otto@blocked.test" });
    expect(otp.error).toMatchObject({ status: 403 });

    const ok = await client().auth.signUp({
      email: "bob@example.test",
      password: "Bob-pass-1234",
      options: { data: { plan: "free" } },
    });
    expect(ok.error).toBeNull();
    const anon = await client().auth.signInAnonymously();
    expect(anon.error).toBeNull();

    const before = await log("before");
    expect(before.map((p) => p.user.email || "anonymous")).toEqual([
      "eve@blocked.test",
      "otto@blocked.test",
      "bob@example.test",
      "anonymous",
    ]);
    expect(before[2]).toMatchObject({
      metadata: { name: "before-user-created" },
      user: { id: ok.data.user!.id, user_metadata: { plan: "free" }, app_metadata: { provider: "email" } },
    });
    const after = await log("after");
    expect(after.map((p) => p.user.id)).toEqual([ok.data.user!.id, anon.data.user!.id]);
    expect(after[0].metadata.name).toBe("after-user-created");
  });

  it("tells the password hook of each attempt; its rejection refuses the sign-in and signs the user out", async () => {
    const bob = client();
    const signedIn = await bob.auth.signInWithPassword({
      email: "bob@example.test",
      password: "Bob-pass-1234",
    });
    expect(signedIn.error).toBeNull();
    const userId = signedIn.data.user!.id;
    for (let i = 0; i < 3; i++) {
      const wrong = await client().auth.signInWithPassword({
        email: "bob@example.test",
        password: "nope-1234",
      });
      expect(wrong.error).toMatchObject({ status: 400, code: "invalid_credentials" });
      expect(wrong.error!.message).toBe("Invalid login credentials");
    }
    expect(await sessions(userId)).toBeGreaterThan(0);
    // The fourth attempt (even with the right password) is rejected with the hook's message.
    const locked = await client().auth.signInWithPassword({
      email: "bob@example.test",
      password: "Bob-pass-1234",
    });
    expect(locked.error).toMatchObject({
      status: 400,
      code: "invalid_credentials",
      message: "Account locked",
    });
    expect(await sessions(userId)).toBe(0);
    expect((await bob.auth.refreshSession()).error).not.toBeNull();

    const attempts = await log("password");
    expect(attempts.map((p) => p.valid)).toEqual([true, false, false, false, true]);
    expect(attempts[0]).toMatchObject({ user_id: userId, metadata: { name: "password-verification" } });
  });

  it("sends mail through a send-email hook that is a Postgres function", async () => {
    await management(server, "PATCH", "/config/auth", {
      hook_send_email_enabled: true,
      hook_send_email_uri: "pg-functions://postgres/public/send_email",
    });
    const sent = await client().auth.signInWithOtp({ email: "sam@example.test" });
    expect(sent.error).toBeNull();
    const [mail] = await log("email");
    expect(mail).toMatchObject({
      metadata: { name: "send-email" },
      user: { email: "sam@example.test" },
      email_data: { email_action_type: "signup" },
    });
    const verified = await client().auth.verifyOtp({
      email: "sam@example.test",
      token: mail.email_data.token,
      type: "email",
    });
    expect(verified.error).toBeNull();
    expect(verified.data.user!.email).toBe("sam@example.test");
    await management(server, "PATCH", "/config/auth", { hook_send_email_enabled: false });
  });

  it("tells the MFA hook of each code; a rejection answers 403 and ends the user's sessions", async () => {
    const a = client();
    const signedUp = await a.auth.signUp({ email: "mia@example.test", password: "Mia-pass-1234" });
    const userId = signedUp.data.user!.id;
    const enrolled = await a.auth.mfa.enroll({ factorType: "totp", friendlyName: "phone" });
    const secret = enrolled.data!.totp.secret;
    const factorId = enrolled.data!.id;

    let challenge = await a.auth.mfa.challenge({ factorId });
    const good = await a.auth.mfa.verify({ factorId, challengeId: challenge.data!.id, code: totp(secret) });
    expect(good.error).toBeNull();

    challenge = await a.auth.mfa.challenge({ factorId });
    const wrong = await a.auth.mfa.verify({
      factorId,
      challengeId: challenge.data!.id,
      code: totp(secret, 50),
    });
    expect(wrong.error).toMatchObject({
      status: 403,
      code: "mfa_verification_rejected",
      message: "Further MFA verification attempts will be rejected.",
    });
    expect(await sessions(userId)).toBe(0);
    const attempts = await log("mfa");
    expect(attempts.map((p) => [p.valid, p.factor_id, p.factor_type, p.user_id])).toEqual([
      [true, factorId, "totp", userId],
      [false, factorId, "totp", userId],
    ]);
  });
});
