import { createClient, type SupabaseClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage, paramsOf, startMailbox, visit } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The SMTP server listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

const SMTP = { user: "strata-mailer", pass: "smtp-secret-for-the-test-0815" };
const TEMPLATE = (label: string) =>
  `<p>Hello {{ .Email }}</p><p><a href="{{ .ConfirmationURL }}">${label}</a></p><p>Code: {{ .Token }}</p>`;

describe("auth mail flows through supabase-js and a real SMTP server", () => {
  let server: TestServer;
  let mailbox: Awaited<ReturnType<typeof startMailbox>>;
  const client = (flowType: "implicit" | "pkce" = "implicit"): SupabaseClient =>
    createClient(server.url, server.anonKey, {
      auth: { persistSession: true, autoRefreshToken: false, flowType, storage: memoryStorage() },
    });
  const config = (changes: Record<string, unknown>) => management(server, "PATCH", "/config/auth", changes);
  const countUsers = async (email: string) =>
    (await server.sql("select count(*)::int as n from auth.users where email = $1", [email])).rows[0].n;

  beforeAll(async () => {
    server = await startTestServer();
    mailbox = await startMailbox(SMTP);
    const patched = await config({
      site_url: "https://app.example.test",
      uri_allow_list: "https://cb.example.test/**",
      smtp_host: "127.0.0.1",
      smtp_port: String(mailbox.port),
      smtp_user: SMTP.user,
      smtp_pass: SMTP.pass,
      smtp_admin_email: "auth@example.test",
      smtp_sender_name: "Example Auth",
      smtp_max_frequency: 0,
      rate_limit_email_sent: 1000,
      mailer_autoconfirm: false,
      mailer_subjects_confirmation: "Confirm your signup",
      mailer_templates_confirmation_content: TEMPLATE("Confirm"),
      mailer_subjects_magic_link: "Your magic link",
      mailer_templates_magic_link_content: TEMPLATE("Log in"),
      mailer_subjects_recovery: "Reset your password",
      mailer_templates_recovery_content: TEMPLATE("Reset"),
    });
    expect(patched.status).toBe(200);
    // The SMTP password is applied but never answered.
    expect(patched.body.smtp_pass).toBeNull();
    expect(JSON.stringify((await management(server, "GET", "/config/auth")).body)).not.toContain(SMTP.pass);
    // ... and stored sealed with the key-encryption key.
    const stored = await server.controlSql(
      "select config->>'smtp_pass' as pass from platform.auth_config where project_ref = $1",
      [server.ref],
    );
    expect(stored.rows[0].pass).toMatch(/^kek1:/);
  });
  afterAll(async () => {
    await server.stop();
    await mailbox.close();
  });

  it("confirms a sign-up through the link of the confirmation mail", async () => {
    const email = "olga@example.test";
    const signUp = await client().auth.signUp({
      email,
      password: "Olga-pass-1234",
      options: { emailRedirectTo: "https://cb.example.test/welcome" },
    });
    expect(signUp.error).toBeNull();
    expect(signUp.data.session).toBeNull();
    const mail = await mailbox.next(email);
    expect(mail).toMatchObject({
      subject: "Confirm your signup",
      from: { address: "auth@example.test", name: "Example Auth" },
      authUser: SMTP.user,
    });
    expect(mail.html).toContain(`Hello ${email}`);
    expect(paramsOf(mail.link!)).toMatchObject({
      type: "signup",
      redirect_to: "https://cb.example.test/welcome",
    });

    const refused = await client().auth.signInWithPassword({ email, password: "Olga-pass-1234" });
    expect(refused.error?.code).toBe("email_not_confirmed");

    const visited = await visit(mail.link!);
    expect(visited.status).toBe(303);
    expect(visited.location.startsWith("https://cb.example.test/welcome#")).toBe(true);
    const params = paramsOf(visited.location);
    expect(decodeJwt(params.access_token)).toMatchObject({ sub: signUp.data.user!.id, aal: "aal1" });
    const { rows } = await server.sql(
      "select email_confirmed_at is not null as ok from auth.users where email = $1",
      [email],
    );
    expect(rows[0].ok).toBe(true);
    // A link works once.
    expect(paramsOf((await visit(mail.link!)).location)).toMatchObject({ error_code: "otp_expired" });
  });

  it("signs in with an emailed code once, and falls back to site_url for a redirect not allowed", async () => {
    const email = "petra@example.test";
    await config({ mailer_autoconfirm: true });
    await client().auth.signUp({ email, password: "Petra-pass-1234" });
    const otp = await client().auth.signInWithOtp({
      email,
      options: { shouldCreateUser: false, emailRedirectTo: "https://evil.example.test/steal" },
    });
    expect(otp.error).toBeNull();
    const mail = await mailbox.next(email);
    expect(mail.subject).toBe("Your magic link");
    expect(paramsOf(mail.link!)).toMatchObject({
      type: "magiclink",
      redirect_to: "https://app.example.test",
    });
    const verified = await client().auth.verifyOtp({ email, token: mail.code!, type: "email" });
    expect(verified.error).toBeNull();
    expect(verified.data.user?.email).toBe(email);
    const again = await client().auth.verifyOtp({ email, token: mail.code!, type: "email" });
    expect(again.error?.code).toBe("otp_expired");
    await config({ mailer_autoconfirm: false });
  });

  it("resets a password through a PKCE recovery link", async () => {
    const email = "quirin@example.test";
    await config({ mailer_autoconfirm: true });
    await client().auth.signUp({ email, password: "Quirin-pass-1234" });
    const browser = client("pkce");
    expect(
      (await browser.auth.resetPasswordForEmail(email, { redirectTo: "https://cb.example.test/reset" }))
        .error,
    ).toBeNull();
    const mail = await mailbox.next(email);
    expect(mail.subject).toBe("Reset your password");
    const visited = await visit(mail.link!);
    expect(visited.location.startsWith("https://cb.example.test/reset?code=")).toBe(true);
    const { code } = paramsOf(visited.location);
    const exchanged = await browser.auth.exchangeCodeForSession(code);
    expect(exchanged.error).toBeNull();
    expect((await browser.auth.updateUser({ password: "Quirin-new-pass-99" })).error).toBeNull();
    const old = await client().auth.signInWithPassword({ email, password: "Quirin-pass-1234" });
    expect(old.error?.code).toBe("invalid_credentials");
    const fresh = await client().auth.signInWithPassword({ email, password: "Quirin-new-pass-99" });
    expect(fresh.error).toBeNull();
    // A PKCE client may also type the mailed code in: verifyOtp signs in at once.
    expect(
      (await browser.auth.signInWithOtp({ email, options: { shouldCreateUser: false } })).error,
    ).toBeNull();
    const typed = await browser.auth.verifyOtp({
      email,
      token: (await mailbox.next(email)).code!,
      type: "email",
    });
    expect(typed.error).toBeNull();
    expect(typed.data.session?.access_token).toBeTruthy();
    // The code was used up.
    const reuse = await fetch(`${server.url}/auth/v1/token?grant_type=pkce`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ auth_code: code, code_verifier: "x".repeat(43) }),
    });
    expect(((await reuse.json()) as { error_code: string }).error_code).toBe("flow_state_not_found");
    // No mail and no error for an unknown address.
    expect((await client().auth.resetPasswordForEmail("nobody@example.test")).error).toBeNull();
    await config({ mailer_autoconfirm: false });
  });

  it("stops sending over rate_limit_email_sent without writing the user", async () => {
    await config({ rate_limit_email_sent: 1 });
    expect((await client().auth.signInWithOtp({ email: "rita@example.test" })).error).toBeNull();
    await mailbox.next("rita@example.test");
    const over = await client().auth.signInWithOtp({ email: "sven@example.test" });
    expect(over.error).toMatchObject({ status: 429, code: "over_email_send_rate_limit" });
    expect(await countUsers("sven@example.test")).toBe(0);
    expect(mailbox.countFor("sven@example.test")).toBe(0);
    await config({ rate_limit_email_sent: 1000 });
    expect((await client().auth.signInWithOtp({ email: "sven@example.test" })).error).toBeNull();
    expect(paramsOf((await mailbox.next("sven@example.test")).link!)).toMatchObject({ type: "signup" });
  });

  it("invites a user by mail and generates links without sending, for the service role only", async () => {
    const admin = createClient(server.url, server.serviceKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const anon = await client().auth.admin.listUsers();
    expect(anon.error).toMatchObject({ status: 403, code: "not_admin" });

    const invited = await admin.auth.admin.inviteUserByEmail("tilda@example.test", {
      redirectTo: "https://cb.example.test/accept",
    });
    expect(invited.error).toBeNull();
    const mail = await mailbox.next("tilda@example.test");
    expect(paramsOf(mail.link!)).toMatchObject({ type: "invite" });
    expect(paramsOf((await visit(mail.link!)).location)).toMatchObject({ type: "invite" });

    const before = mailbox.mails.length;
    const link = await admin.auth.admin.generateLink({ type: "magiclink", email: "tilda@example.test" });
    expect(link.error).toBeNull();
    expect(link.data.properties?.verification_type).toBe("magiclink");
    const verified = await client().auth.verifyOtp({
      email: "tilda@example.test",
      token: link.data.properties!.email_otp,
      type: "magiclink",
    });
    expect(verified.error).toBeNull();
    expect(mailbox.mails.length).toBe(before);

    const page = await admin.auth.admin.listUsers({ page: 1, perPage: 2 });
    expect(page.error).toBeNull();
    expect(page.data.users).toHaveLength(2);
    expect((page.data as { total?: number }).total).toBe(
      (await server.sql("select count(*)::int as n from auth.users")).rows[0].n,
    );
  });
});
