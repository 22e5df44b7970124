import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "@supabase/supabase-js";
import { decodeJwt } from "jose";
import { Webhook } from "standardwebhooks";
import { startTestServer, type TestServer } from "../helpers/server";
import { management } from "./helpers";
import { memoryStorage } from "./mailbox";
import { allowLoopbackForTests } from "../../src/net/outbound";

// The send-SMS hook listens on loopback, which the outbound policy reaches only with the tests' switch.
allowLoopbackForTests();

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** The platform's stored token: SHA-224 of the number and the code, hex. */
const hashOf = (phone: string, otp: string) =>
  createHash("sha224")
    .update(phone + otp)
    .digest("hex");

/**
 * The send-SMS hook as a pg-function: it keeps every code in a table the test reads by SQL (granted to
 * supabase_auth_admin, the role hooks run as, as the platform's docs say).
 */
const OUTBOX_SQL = `
  create table public.sms_outbox (id bigserial primary key, phone text, otp text, sms_type text, user_phone text,
                                  new_phone text);
  grant insert on public.sms_outbox to supabase_auth_admin;
  grant usage on sequence public.sms_outbox_id_seq to supabase_auth_admin;
  create function public.send_sms(event jsonb) returns jsonb language plpgsql as $$
  begin
    insert into public.sms_outbox (phone, otp, sms_type, user_phone, new_phone)
    values (event->'sms'->>'phone', event->'sms'->>'otp', event->'sms'->>'sms_type', event->'user'->>'phone',
            event->'user'->>'new_phone');
    return '{}'::jsonb;
  end $$;`;

describe("phone sign-in and the send-SMS hook", () => {
  let server: TestServer;
  let receiver: Server;
  let receiverUrl: string;
  const received: Received[] = [];
  const secret = "whsec_" + randomBytes(32).toString("base64");

  const client = () =>
    createClient(server.url, server.anonKey, {
      auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
  const config = async (fields: Record<string, unknown>) => {
    const res = await management(server, "PATCH", "/config/auth", fields);
    expect(res.status).toBe(200);
    return res.body;
  };
  const lastOtp = async (phone: string) =>
    (await server.sql("select otp from public.sms_outbox where phone = $1 order by id desc limit 1", [phone]))
      .rows[0]?.otp as string | undefined;
  const userRow = async (where: string, value: string) =>
    (await server.sql(`select * from auth.users where ${where} = $1`, [value])).rows[0];

  beforeAll(async () => {
    // One local receiver plays both the HTTP hook (/hook) and Twilio's API (/twilio/...).
    receiver = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push({ path: req.url ?? "", headers: req.headers as Record<string, string>, body });
        if (req.url === "/hook") {
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
          return;
        }
        const form = new URLSearchParams(body);
        if (req.url?.startsWith("/verify/")) {
          // Twilio Verify: it sends its own code (here always 777777) and checks it.
          const approved = req.url.endsWith("/VerificationCheck") && form.get("Code") === "777777";
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(
              JSON.stringify(
                req.url.endsWith("/Verifications")
                  ? { sid: "VE1", status: "pending", to: form.get("To") }
                  : { status: approved ? "approved" : "pending", valid: approved },
              ),
            );
          return;
        }
        if (form.get("To") === "+15550100666") {
          res.writeHead(400, { "content-type": "application/json" }).end(
            JSON.stringify({
              code: 21211,
              message: "Invalid 'To' Phone Number",
              more_info: "https://example.test/21211",
            }),
          );
          return;
        }
        res
          .writeHead(201, { "content-type": "application/json" })
          .end(JSON.stringify({ sid: `SM${received.length}`, status: "queued", to: form.get("To") }));
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    server = await startTestServer({
      STRATA_SMS_TWILIO_URL: `${receiverUrl}/twilio`,
      STRATA_SMS_TWILIO_VERIFY_URL: `${receiverUrl}/verify`,
    });
    await server.sql(OUTBOX_SQL);
    await config({ rate_limit_otp: 1000, rate_limit_verify: 1000, sms_max_frequency: 0 });
  });
  afterAll(async () => {
    await new Promise((r) => receiver.close(r));
    await server.stop();
  });

  it("refuses phone sign-in while disabled, a malformed number, and a send with no provider or hook", async () => {
    const a = client();
    const off = await a.auth.signInWithOtp({ phone: "+15550100001" });
    expect(off.error).toMatchObject({ status: 400, code: "phone_provider_disabled" });

    // The config refuses what no provider or test number could use.
    for (const bad of [{ sms_provider: "carrier-pigeon" }, { sms_test_otp: "+1 555=12" }]) {
      expect((await management(server, "PATCH", "/config/auth", bad)).status).toBe(400);
    }
    await config({ external_phone_enabled: true });
    const malformed = await a.auth.signInWithOtp({ phone: "+1 555-CALL-NOW" });
    expect(malformed.error).toMatchObject({
      status: 400,
      code: "validation_failed",
      message: "Invalid phone number format (E.164 required)",
    });
    // Twilio without credentials: the platform's 500, and the new user is not kept.
    const unconfigured = await fetch(`${server.url}/auth/v1/otp`, {
      method: "POST",
      headers: { apikey: server.anonKey, "content-type": "application/json" },
      body: JSON.stringify({ phone: "+15550100001" }),
    });
    expect(unconfigured.status).toBe(500);
    expect(await unconfigured.json()).toMatchObject({ msg: "Unable to get SMS provider" });
    expect(await userRow("phone", "15550100001")).toBeUndefined();

    const settings = await fetch(`${server.url}/auth/v1/settings`, { headers: { apikey: server.anonKey } });
    expect(await settings.json()).toMatchObject({
      external: { phone: true },
      phone_autoconfirm: false,
      sms_provider: "twilio",
    });
  });

  it("signs up by phone through the signed HTTP hook and confirms the number with the code", async () => {
    await config({
      hook_send_sms_enabled: true,
      hook_send_sms_uri: `${receiverUrl}/hook`,
      hook_send_sms_secrets: `v1,${secret}`,
    });
    const a = client();
    const signUp = await a.auth.signUp({ phone: "+1 555 010 0002", password: "Phone-pass-1234" });
    expect(signUp.error).toBeNull();
    expect(signUp.data.session).toBeNull();
    expect(signUp.data.user).toMatchObject({ phone: "15550100002", app_metadata: { provider: "phone" } });

    const call = received.filter((r) => r.path === "/hook").at(-1)!;
    const payload = new Webhook(secret).verify(call.body, call.headers) as {
      user: { id: string; phone: string };
      sms: { otp: string; phone: string };
      metadata: { name: string };
    };
    expect(payload.metadata.name).toBe("send-sms");
    expect(payload.user).toMatchObject({ id: signUp.data.user!.id, phone: "15550100002" });
    expect(payload.sms.otp).toMatch(/^\d{6}$/);

    // Only the hash of the code is stored, in the user row and in one_time_tokens.
    const row = await userRow("phone", "15550100002");
    expect(row.confirmation_token).toBe(hashOf("15550100002", payload.sms.otp));
    expect(row.phone_confirmed_at).toBeNull();
    const { rows: tokens } = await server.sql(
      "select token_type::text, relates_to, token_hash from auth.one_time_tokens where user_id = $1",
      [row.id],
    );
    expect(tokens).toEqual([
      { token_type: "confirmation_token", relates_to: "15550100002", token_hash: row.confirmation_token },
    ]);

    const early = await a.auth.signInWithPassword({ phone: "+15550100002", password: "Phone-pass-1234" });
    expect(early.error).toMatchObject({ code: "phone_not_confirmed" });
    const wrong = await a.auth.verifyOtp({ phone: "+15550100002", token: "000000", type: "sms" });
    expect(wrong.error).toMatchObject({ status: 403, code: "otp_expired" });

    const verified = await a.auth.verifyOtp({
      phone: "+15550100002",
      token: payload.sms.otp,
      type: "sms",
    });
    expect(verified.error).toBeNull();
    const claims = decodeJwt(verified.data.session!.access_token);
    expect(claims).toMatchObject({ phone: "15550100002", email: "" });
    expect((claims.amr as { method: string }[]).map((m) => m.method)).toEqual(["otp"]);
    const confirmed = await userRow("phone", "15550100002");
    expect(confirmed.phone_confirmed_at).not.toBeNull();
    expect(confirmed.confirmation_token).toBeNull();
    // The code is spent.
    const again = await client().auth.verifyOtp({
      phone: "+15550100002",
      token: payload.sms.otp,
      type: "sms",
    });
    expect(again.error).toMatchObject({ code: "otp_expired" });

    const signIn = await a.auth.signInWithPassword({ phone: "+15550100002", password: "Phone-pass-1234" });
    expect(signIn.error).toBeNull();
    expect(decodeJwt(signIn.data.session!.access_token).amr).toEqual([
      expect.objectContaining({ method: "password" }),
    ]);
  });

  it("signs in with an SMS code through the pg-functions hook, within the limits", async () => {
    await config({ hook_send_sms_uri: "pg-functions://postgres/public/send_sms", hook_send_sms_secrets: "" });
    const a = client();
    const noCreate = await a.auth.signInWithOtp({
      phone: "+15550100003",
      options: { shouldCreateUser: false },
    });
    expect(noCreate.error).toMatchObject({ code: "otp_disabled" });

    expect((await a.auth.signInWithOtp({ phone: "+15550100003" })).error).toBeNull();
    const otp = (await lastOtp("15550100003"))!;
    expect(otp).toMatch(/^\d{6}$/);
    const { data, error } = await a.auth.verifyOtp({ phone: "15550100003", token: otp, type: "sms" });
    expect(error).toBeNull();
    expect(data.user).toMatchObject({
      phone: "15550100003",
      identities: [expect.objectContaining({ provider: "phone" })],
    });

    // An expired code: sent longer ago than sms_otp_exp.
    await config({ sms_otp_exp: 60 });
    expect((await a.auth.signInWithOtp({ phone: "+15550100003" })).error).toBeNull();
    const stale = (await lastOtp("15550100003"))!;
    await server.sql(
      "update auth.users set confirmation_sent_at = now() - interval '61 seconds' where phone = '15550100003'",
    );
    const expired = await a.auth.verifyOtp({ phone: "15550100003", token: stale, type: "sms" });
    expect(expired.error).toMatchObject({ status: 403, code: "otp_expired" });

    // sms_max_frequency: a second code for the same number too soon.
    await config({ sms_max_frequency: 60, sms_otp_length: 8 });
    expect((await a.auth.signInWithOtp({ phone: "+15550100004" })).error).toBeNull();
    expect(await lastOtp("15550100004")).toMatch(/^\d{8}$/);
    const tooSoon = await a.auth.signInWithOtp({ phone: "+15550100004" });
    expect(tooSoon.error).toMatchObject({ status: 429, code: "over_sms_send_rate_limit" });
    expect(tooSoon.error!.message).toMatch(/only request this after \d+ seconds/);

    // rate_limit_sms_sent: messages per hour for the project.
    await config({ sms_max_frequency: 0, sms_otp_length: 6, rate_limit_sms_sent: 2 });
    expect((await a.auth.signInWithOtp({ phone: "+15550100005" })).error).toBeNull();
    expect((await a.auth.signInWithOtp({ phone: "+15550100006" })).error).toBeNull();
    const over = await a.auth.signInWithOtp({ phone: "+15550100007" });
    expect(over.error).toMatchObject({ status: 429, code: "over_sms_send_rate_limit" });
    expect(await lastOtp("15550100007")).toBeUndefined();
    await config({ rate_limit_sms_sent: 1000 });
  });

  it("sends through Twilio's API with the template, and answers its refusal as sms_send_failed", async () => {
    const set = await config({
      hook_send_sms_enabled: false,
      sms_provider: "twilio",
      sms_twilio_account_sid: "AC0123",
      sms_twilio_auth_token: "twilio-secret-token",
      sms_twilio_message_service_sid: "MG0456",
      sms_template: "Strata code: {{ .Code }}",
    });
    // Provider credentials and hook secrets are applied, never answered, and stored sealed.
    expect(set).toMatchObject({ sms_twilio_auth_token: null, sms_twilio_account_sid: "AC0123" });
    expect((await management(server, "GET", "/config/auth")).body).toMatchObject({
      sms_twilio_auth_token: null,
      hook_send_sms_secrets: null,
    });
    const { rows: stored } = await server.controlSql(
      "select config::text as c from platform.auth_config where project_ref = $1",
      [server.ref],
    );
    expect(stored[0].c).not.toContain("twilio-secret-token");

    const a = client();
    const sent = await a.auth.signInWithOtp({ phone: "+15550100008" });
    expect(sent.error).toBeNull();
    const call = received.at(-1)!;
    expect(call.path).toBe("/twilio/2010-04-01/Accounts/AC0123/Messages.json");
    expect(call.headers.authorization).toBe(
      "Basic " + Buffer.from("AC0123:twilio-secret-token").toString("base64"),
    );
    const form = new URLSearchParams(call.body);
    expect(form.get("To")).toBe("+15550100008");
    expect(form.get("From")).toBe("MG0456");
    expect(sent.data.messageId).toBe(`SM${received.length}`);
    const code = /^Strata code: (\d{6})$/.exec(form.get("Body")!)![1];
    const verified = await a.auth.verifyOtp({ phone: "+15550100008", token: code, type: "sms" });
    expect(verified.error).toBeNull();

    const whatsapp = await a.auth.signInWithOtp({ phone: "+15550100009", options: { channel: "whatsapp" } });
    expect(whatsapp.error).toBeNull();
    expect(new URLSearchParams(received.at(-1)!.body).get("To")).toBe("whatsapp:+15550100009");

    const refused = await a.auth.signInWithOtp({ phone: "+15550100666" });
    expect(refused.error).toMatchObject({ status: 422, code: "sms_send_failed" });
    expect(refused.error!.message).toContain("Invalid 'To' Phone Number");
    expect(refused.error!.message).not.toContain("twilio-secret-token");
    expect(await userRow("phone", "15550100666")).toBeUndefined();

    // Twilio Verify sends and checks its own codes.
    await config({
      sms_provider: "twilio_verify",
      sms_twilio_verify_account_sid: "AC0789",
      sms_twilio_verify_auth_token: "verify-secret-token",
      sms_twilio_verify_message_service_sid: "VA0123",
    });
    expect((await a.auth.signInWithOtp({ phone: "+15550100016" })).data.messageId).toBe("VE1");
    expect(received.at(-1)!.path).toBe("/verify/v2/Services/VA0123/Verifications");
    const rejected = await a.auth.verifyOtp({ phone: "15550100016", token: "111111", type: "sms" });
    expect(rejected.error).toMatchObject({ code: "otp_expired" });
    const approved = await a.auth.verifyOtp({ phone: "15550100016", token: "777777", type: "sms" });
    expect(approved.error).toBeNull();
    expect(received.at(-1)!.headers.authorization).toBe(
      "Basic " + Buffer.from("AC0789:verify-secret-token").toString("base64"),
    );
    await config({ sms_provider: "twilio" });
  });

  it("takes a test number's fixed code while sms_test_otp_valid_until lasts, sending nothing", async () => {
    await config({
      sms_test_otp: "15550100010=424242,15550100011=135790",
      sms_test_otp_valid_until: new Date(Date.now() + 3600_000).toISOString(),
    });
    const a = client();
    const before = received.length;
    const sent = await a.auth.signInWithOtp({ phone: "+15550100010" });
    expect(sent.data.messageId).toBe("test-otp");
    expect(received.length).toBe(before);
    expect((await a.auth.verifyOtp({ phone: "15550100010", token: "424242", type: "sms" })).error).toBeNull();

    await config({ sms_test_otp_valid_until: new Date(Date.now() - 1000).toISOString() });
    const real = await a.auth.signInWithOtp({ phone: "+15550100011" });
    expect(real.error).toBeNull();
    expect(received.length).toBe(before + 1);
    const refused = await a.auth.verifyOtp({ phone: "15550100011", token: "135790", type: "sms" });
    expect(refused.error).toMatchObject({ code: "otp_expired" });
    await config({ sms_test_otp: "" });
  });

  it("changes a user's number with a code sent to the new one, and reauthenticates a phone user by SMS", async () => {
    await config({
      hook_send_sms_enabled: true,
      hook_send_sms_uri: "pg-functions://postgres/public/send_sms",
      security_update_password_require_reauthentication: true,
    });
    const a = client();
    const { data } = await a.auth.signUp({ email: "pia@example.test", password: "Pia-pass-12345" });
    expect(data.session).not.toBeNull();
    const update = await a.auth.updateUser({ phone: "+15550100012" });
    expect(update.error).toBeNull();
    let row = await userRow("email", "pia@example.test");
    expect(row).toMatchObject({ phone: null, phone_change: "15550100012" });
    expect(
      (await server.sql("select * from public.sms_outbox order by id desc limit 1")).rows[0],
    ).toMatchObject({
      phone: "15550100012",
      new_phone: "15550100012",
    });

    const resent = await a.auth.resend({ type: "phone_change", phone: "+15550100012" });
    expect(resent.error).toBeNull();
    const otp = (await lastOtp("15550100012"))!;
    row = await userRow("email", "pia@example.test");
    expect(row.phone_change_token).toBe(hashOf("15550100012", otp));

    const taken = await client().auth.signUp({ email: "ole@example.test", password: "Ole-pass-12345" });
    expect(taken.error).toBeNull();

    const verified = await a.auth.verifyOtp({ phone: "+15550100012", token: otp, type: "phone_change" });
    expect(verified.error).toBeNull();
    expect(verified.data.user).toMatchObject({ phone: "15550100012", email: "pia@example.test" });
    row = await userRow("email", "pia@example.test");
    expect(row).toMatchObject({ phone: "15550100012", phone_change: null, phone_change_token: null });
    expect(row.phone_confirmed_at).not.toBeNull();
    expect(row.raw_app_meta_data.providers).toEqual(["email", "phone"]);

    // The number is now Pia's: nobody else may take it.
    const b = createClient(server.url, server.anonKey, {
      auth: { persistSession: true, autoRefreshToken: false, storage: memoryStorage() },
    });
    await b.auth.signInWithPassword({ email: "ole@example.test", password: "Ole-pass-12345" });
    const clash = await b.auth.updateUser({ phone: "+15550100012" });
    expect(clash.error).toMatchObject({ status: 422, code: "phone_exists" });

    // A user with only a phone gets the reauthentication nonce by SMS.
    const p = client();
    expect((await p.auth.signInWithOtp({ phone: "+15550100003" })).error).toBeNull();
    await p.auth.verifyOtp({ phone: "15550100003", token: (await lastOtp("15550100003"))!, type: "sms" });
    await server.sql(
      "update auth.sessions set created_at = now() - interval '2 days' where user_id = (select id from auth.users where phone = '15550100003')",
    );
    expect((await p.auth.reauthenticate()).error).toBeNull();
    const nonce = (await lastOtp("15550100003"))!;
    const bad = await p.auth.updateUser({ password: "New-phone-pass-1", nonce: "000000" });
    expect(bad.error).toMatchObject({ code: "reauthentication_not_valid" });
    expect((await p.auth.updateUser({ password: "New-phone-pass-1", nonce })).error).toBeNull();
    const signIn = await client().auth.signInWithPassword({
      phone: "15550100003",
      password: "New-phone-pass-1",
    });
    expect(signIn.error).toBeNull();
    await config({ security_update_password_require_reauthentication: false });
  });

  it("enrolls, challenges and verifies a phone MFA factor when the config allows it", async () => {
    const a = client();
    await a.auth.signUp({ email: "mo@example.test", password: "Mo-pass-123456" });
    const disabled = await a.auth.mfa.enroll({ factorType: "phone", phone: "+15550100013" });
    expect(disabled.error).toMatchObject({ code: "mfa_phone_enroll_not_enabled" });

    await config({
      mfa_phone_enroll_enabled: true,
      mfa_phone_verify_enabled: true,
      mfa_phone_template: "Your Strata MFA code is {{ .Code }}",
    });
    const enrolled = await a.auth.mfa.enroll({ factorType: "phone", phone: "+15550100013" });
    expect(enrolled.error).toBeNull();
    expect(enrolled.data).toMatchObject({ type: "phone", phone: "+15550100013" });
    const factorId = enrolled.data!.id;
    const challenge = await a.auth.mfa.challenge({ factorId });
    expect(challenge.error).toBeNull();
    const sms = (
      await server.sql(
        "select otp, sms_type from public.sms_outbox where phone = '15550100013' order by id desc",
      )
    ).rows[0];
    expect(sms.sms_type).toBe("mfa");
    const { rows: stored } = await server.sql("select otp_code from auth.mfa_challenges where id = $1", [
      challenge.data!.id,
    ]);
    expect(stored[0].otp_code).toBe(hashOf("15550100013", sms.otp));

    const wrong = await a.auth.mfa.verify({ factorId, challengeId: challenge.data!.id, code: "000000" });
    expect(wrong.error).toMatchObject({ code: "mfa_verification_failed" });
    const ok = await a.auth.mfa.verify({ factorId, challengeId: challenge.data!.id, code: sms.otp });
    expect(ok.error).toBeNull();
    const claims = decodeJwt(ok.data!.access_token);
    expect(claims.aal).toBe("aal2");
    expect((claims.amr as { method: string }[]).map((m) => m.method)).toContain("mfa/phone");
    const { rows: factor } = await server.sql(
      "select status::text, phone from auth.mfa_factors where id = $1",
      [factorId],
    );
    expect(factor[0]).toEqual({ status: "verified", phone: "15550100013" });
    expect((await a.auth.mfa.listFactors()).data!.phone).toEqual([
      expect.objectContaining({ id: factorId, phone: "15550100013" }),
    ]);
  });

  it("creates and updates phone users through the admin API", async () => {
    const admin = createClient(server.url, server.serviceKey, {
      auth: { persistSession: false, autoRefreshToken: false },
    });
    const created = await admin.auth.admin.createUser({
      phone: "+15550100014",
      password: "Admin-phone-123",
      phone_confirm: true,
    });
    expect(created.error).toBeNull();
    expect(created.data.user).toMatchObject({ phone: "15550100014", app_metadata: { provider: "phone" } });
    const signIn = await client().auth.signInWithPassword({
      phone: "+15550100014",
      password: "Admin-phone-123",
    });
    expect(signIn.error).toBeNull();

    const dup = await admin.auth.admin.createUser({ phone: "15550100014" });
    expect(dup.error).toMatchObject({ status: 422, code: "phone_exists" });
    const malformed = await admin.auth.admin.createUser({ phone: "call me" });
    expect(malformed.error).toMatchObject({ status: 400, code: "validation_failed" });

    const updated = await admin.auth.admin.updateUserById(created.data.user!.id, {
      phone: "+15550100015",
      phone_confirm: false,
    });
    expect(updated.error).toBeNull();
    const row = await userRow("id", created.data.user!.id);
    expect(row).toMatchObject({ phone: "15550100015", phone_confirmed_at: null });
    const { rows: identity } = await server.sql(
      "select identity_data from auth.identities where user_id = $1 and provider = 'phone'",
      [row.id],
    );
    expect(identity[0].identity_data).toMatchObject({ phone: "15550100015", phone_verified: false });
  });
  it("signs phone users up at once with sms_autoconfirm, sending nothing", async () => {
    await config({ sms_autoconfirm: true, hook_send_sms_enabled: true });
    const outbox = Number((await server.sql("select count(*) from public.sms_outbox")).rows[0].count);
    const a = client();
    const { data, error } = await a.auth.signUp({ phone: "+15550100017", password: "Auto-phone-1234" });
    expect(error).toBeNull();
    expect(decodeJwt(data.session!.access_token)).toMatchObject({ phone: "15550100017" });
    expect((await userRow("phone", "15550100017")).phone_confirmed_at).not.toBeNull();
    expect(Number((await server.sql("select count(*) from public.sms_outbox")).rows[0].count)).toBe(outbox);
    const again = await client().auth.signUp({ phone: "+15550100017", password: "Other-phone-1234" });
    expect(again.error).toMatchObject({ status: 422, code: "user_already_exists" });
    const settings = await fetch(`${server.url}/auth/v1/settings`, { headers: { apikey: server.anonKey } });
    expect(await settings.json()).toMatchObject({ phone_autoconfirm: true });

    // WhatsApp goes only through Twilio or the hook.
    await config({ hook_send_sms_enabled: false, sms_provider: "vonage" });
    const whatsapp = await a.auth.signInWithOtp({ phone: "+15550100017", options: { channel: "whatsapp" } });
    expect(whatsapp.error).toMatchObject({ status: 400, code: "validation_failed" });
    await config({ sms_autoconfirm: false });
  });

  it("refuses a body with both an email address and a phone number, writing no user", async () => {
    const cases = [
      { path: "/signup", ending: " on signup." },
      { path: "/otp", ending: "" },
      { path: "/token?grant_type=password", ending: " on login." },
    ];
    for (const { path, ending } of cases) {
      const res = await fetch(`${server.url}/auth/v1${path}`, {
        method: "POST",
        headers: { apikey: server.anonKey, "content-type": "application/json" },
        body: JSON.stringify({ email: "both@example.test", phone: "+15550100018", password: "Both-1234-pw" }),
      });
      expect({ path, status: res.status, body: await res.json() }).toMatchObject({
        path,
        status: 400,
        body: {
          error_code: "validation_failed",
          msg: `Only an email address or phone number should be provided${ending}`,
        },
      });
    }
    const written = await server.sql(
      "select count(*)::int as n from auth.users where email = 'both@example.test' or phone = '15550100018'",
    );
    expect(written.rows[0].n).toBe(0);
    // The phone alone still signs up.
    await config({ external_phone_enabled: true, sms_autoconfirm: true });
    const { error } = await client().auth.signUp({ phone: "+15550100018", password: "Both-1234-pw" });
    expect(error).toBeNull();
    expect(await userRow("phone", "15550100018")).toBeDefined();
    await config({ sms_autoconfirm: false });
  });
});
