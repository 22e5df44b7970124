import { randomInt } from "node:crypto";
import type pg from "pg";
import type { StrataConfig } from "../config";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";
import { hookMetadata, runHook } from "./hook";
import { tokenHash } from "./otp";
import { saveOneTimeToken } from "./store/oneTimeTokens";
import { apiUser, setUser, userById, type UserRow } from "./store/users";

/**
 * Phone numbers and SMS delivery as the platform's auth server does them: numbers are kept as E.164 digits
 * (no `+`), codes go out through the send-SMS hook when it is enabled, else through the configured provider's
 * HTTP API, and only their hash (SHA-224 of number and code, as for mail) is stored.
 */

export type SmsProviderName = "twilio" | "twilio_verify" | "messagebird" | "textlocal" | "vonage";
export type SmsProviderUrls = StrataConfig["smsProviderUrls"];

const E164 = /^[1-9][0-9]{1,14}$/;
/** The providers' own HTTP timeout on the platform. */
const PROVIDER_TIMEOUT_MS = 10_000;

/** `+1 555 0100` → `15550100`: the form numbers are stored and compared in. */
export const formatPhone = (phone: string) => phone.trim().replace(/^\+/, "").replaceAll(" ", "");

/** A number in E.164 form, or the platform's 400. */
export function validatePhone(phone: unknown): string {
  const formatted = typeof phone === "string" ? formatPhone(phone) : "";
  if (!E164.test(formatted)) {
    throw new AuthApiError(400, "validation_failed", "Invalid phone number format (E.164 required)");
  }
  return formatted;
}

/** The fixed code of a test number (sms_test_otp `number=code,...`) while sms_test_otp_valid_until lasts. */
export function testOtp(settings: AuthSettings, phone: string, now = Date.now()): string | undefined {
  const until = settings.sms_test_otp_valid_until;
  if (typeof until === "string" && until && !(now < Date.parse(until))) return undefined;
  for (const pair of String(settings.sms_test_otp ?? "").split(",")) {
    const [number, code] = pair.split("=");
    if (code !== undefined && formatPhone(number) === phone && code.trim()) return code.trim();
  }
  return undefined;
}

const INVALID_CHANNEL =
  "Invalid channel, supported values are 'sms' or 'whatsapp'. 'whatsapp' is only supported if Twilio or Twilio Verify is used as the provider.";

/** The delivery channel of a request (sms unless given); whatsapp only through Twilio or the hook. */
export function channelOf(settings: AuthSettings, channel: unknown): "sms" | "whatsapp" {
  const value = channel === undefined || channel === null || channel === "" ? "sms" : channel;
  if (value === "sms") return "sms";
  if (
    value === "whatsapp" &&
    (settings.hook_send_sms_enabled === true ||
      settings.sms_provider === "twilio" ||
      settings.sms_provider === "twilio_verify")
  ) {
    return "whatsapp";
  }
  throw new AuthApiError(400, "validation_failed", INVALID_CHANNEL);
}

function newOtp(length: number): string {
  let otp = "";
  for (let i = 0; i < length; i++) otp += String(randomInt(10));
  return otp;
}

/** An OTP length from the config, within the platform's 6-10 (6 otherwise). */
export function otpLength(value: unknown): number {
  const n = Number(value);
  return Number.isInteger(n) && n >= 6 && n <= 10 ? n : 6;
}

/** The message of a code: the template's `{{ .Code }}` filled in (the platform's Go template field). */
export function smsMessage(template: unknown, otp: string): string {
  const text = typeof template === "string" && template ? template : "Your code is {{ .Code }}";
  return text.replace(/\{\{\s*\.Code\s*\}\}/g, otp);
}

/** Why a provider did not take a message: its own words (never the request, which carries the credentials). */
export class SmsProviderError extends Error {}

interface SmsProvider {
  send(phone: string, message: string, channel: string, otp: string): Promise<string>;
  /** Twilio Verify checks codes itself (it generates and sends them). */
  verify?(phone: string, code: string): Promise<void>;
}

async function postForm(
  url: string,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown> }> {
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: new URLSearchParams(form).toString(),
      signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS),
    });
  } catch (e) {
    throw new SmsProviderError(`the provider could not be reached (${(e as Error).name})`);
  }
  const text = await res.text();
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text);
  } catch {
    throw new SmsProviderError(`the provider answered ${res.status} without JSON`);
  }
  return { status: res.status, json: json ?? {} };
}

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`;

function required(settings: AuthSettings, fields: string[]): Record<string, string> {
  const values: Record<string, string> = {};
  for (const field of fields) {
    const value = settings[field];
    if (typeof value !== "string" || !value.trim()) throw new Error(`missing ${field}`);
    values[field] = value.trim();
  }
  return values;
}

const twilioError = (json: Record<string, unknown>) =>
  new SmsProviderError(
    `${String(json.message ?? "Twilio error")} More information: ${String(json.more_info ?? "")}`,
  );

/** The configured provider (sms_provider and its fields) over its HTTP API, as the platform calls it. */
function providerOf(settings: AuthSettings, urls: SmsProviderUrls): SmsProvider {
  const name = String(settings.sms_provider ?? "") as SmsProviderName;
  const base = (fallback: string) => (urls[name] ?? fallback).replace(/\/+$/, "");
  switch (name) {
    case "twilio": {
      const c = required(settings, [
        "sms_twilio_account_sid",
        "sms_twilio_auth_token",
        "sms_twilio_message_service_sid",
      ]);
      const url = `${base("https://api.twilio.com")}/2010-04-01/Accounts/${encodeURIComponent(c.sms_twilio_account_sid)}/Messages.json`;
      const contentSid = String(settings.sms_twilio_content_sid ?? "");
      return {
        async send(phone, message, channel, otp) {
          let to = `+${phone}`;
          let from = c.sms_twilio_message_service_sid;
          const form: Record<string, string> = { To: to, Channel: channel, From: from, Body: message };
          if (channel === "whatsapp") {
            to = `whatsapp:${to}`;
            if (E164.test(formatPhone(from))) from = `whatsapp:${from}`;
            Object.assign(form, { To: to, From: from });
            if (contentSid) {
              delete form.Body;
              form.ContentSid = contentSid;
              form.ContentVariables = JSON.stringify({ 1: otp });
            }
          }
          const { status, json } = await postForm(url, form, {
            authorization: basic(c.sms_twilio_account_sid, c.sms_twilio_auth_token),
          });
          if (status !== 200 && status !== 201) throw twilioError(json);
          if (json.status === "failed" || json.status === "undelivered") {
            throw new SmsProviderError(
              `twilio error: ${String(json.error_message)} ${String(json.error_code)} for message ${String(json.sid)}`,
            );
          }
          return String(json.sid ?? "");
        },
      };
    }
    case "twilio_verify": {
      const c = required(settings, [
        "sms_twilio_verify_account_sid",
        "sms_twilio_verify_auth_token",
        "sms_twilio_verify_message_service_sid",
      ]);
      const service = `${base("https://verify.twilio.com")}/v2/Services/${encodeURIComponent(c.sms_twilio_verify_message_service_sid)}`;
      const auth = { authorization: basic(c.sms_twilio_verify_account_sid, c.sms_twilio_verify_auth_token) };
      return {
        async send(phone, _message, channel) {
          const { status, json } = await postForm(
            `${service}/Verifications`,
            { To: `+${phone}`, Channel: channel },
            auth,
          );
          if (status !== 200 && status !== 201) throw twilioError(json);
          return String(json.sid ?? "");
        },
        async verify(phone, code) {
          const { status, json } = await postForm(
            `${service}/VerificationCheck`,
            { To: `+${phone}`, Code: code },
            auth,
          );
          if (status !== 200 && status !== 201) throw twilioError(json);
          if (json.status !== "approved" || json.valid !== true) {
            throw new SmsProviderError(`twilio verification error: ${String(json.status)}`);
          }
        },
      };
    }
    case "messagebird": {
      const c = required(settings, ["sms_messagebird_access_key", "sms_messagebird_originator"]);
      return {
        async send(phone, message, channel) {
          if (channel !== "sms") throw new SmsProviderError(`channel type "${channel}" is not supported`);
          const { status, json } = await postForm(
            `${base("https://rest.messagebird.com")}/messages`,
            {
              originator: c.sms_messagebird_originator,
              body: message,
              recipients: phone,
              type: "sms",
              datacoding: "unicode",
            },
            { authorization: `AccessKey ${c.sms_messagebird_access_key}` },
          );
          if ([400, 401, 403, 422].includes(status)) {
            const errors = json.errors as { description?: string }[] | undefined;
            throw new SmsProviderError(String(errors?.[0]?.description ?? `messagebird answered ${status}`));
          }
          const sent = (json.recipients as { totalSentCount?: number } | undefined)?.totalSentCount ?? 0;
          if (!sent) throw new SmsProviderError("messagebird error: total sent count is 0");
          return String(json.id ?? "");
        },
      };
    }
    case "textlocal": {
      const c = required(settings, ["sms_textlocal_api_key", "sms_textlocal_sender"]);
      return {
        async send(phone, message, channel) {
          if (channel !== "sms") throw new SmsProviderError(`channel type "${channel}" is not supported`);
          const { json } = await postForm(`${base("https://api.textlocal.in")}/send`, {
            sender: c.sms_textlocal_sender,
            apikey: c.sms_textlocal_api_key,
            message,
            numbers: phone,
          });
          const id = String((json.messages as { id?: string }[] | undefined)?.[0]?.id ?? "");
          if (json.status !== "success") {
            const error = (json.errors as { code?: number; message?: string }[] | undefined)?.[0];
            throw new SmsProviderError(
              `textlocal error: ${String(error?.message)} (code: ${String(error?.code)})`,
            );
          }
          return id;
        },
      };
    }
    case "vonage": {
      const c = required(settings, ["sms_vonage_api_key", "sms_vonage_api_secret", "sms_vonage_from"]);
      return {
        async send(phone, message, channel) {
          if (channel !== "sms") throw new SmsProviderError(`channel type "${channel}" is not supported`);
          const form: Record<string, string> = {
            from: c.sms_vonage_from,
            to: phone,
            text: message,
            api_key: c.sms_vonage_api_key,
            api_secret: c.sms_vonage_api_secret,
          };
          // eslint-disable-next-line no-control-regex
          if (!/^[\x00-\x7f]*$/.test(message)) form.type = "unicode";
          const { json } = await postForm(`${base("https://rest.nexmo.com")}/sms/json`, form);
          const first = (json.messages as Record<string, string>[] | undefined)?.[0];
          if (!first) throw new SmsProviderError("vonage error: Internal Error");
          if (first.status !== "0") {
            throw new SmsProviderError(`vonage error: ${first["error-text"]} (status: ${first.status})`);
          }
          return String(first["message-id"] ?? "");
        },
      };
    }
    default:
      throw new Error(`sms provider ${name} could not be found`);
  }
}

function providerFor(settings: AuthSettings, urls: SmsProviderUrls): SmsProvider {
  try {
    return providerOf(settings, urls);
  } catch (e) {
    // A missing provider or credential is the project's configuration: a 500 as on the platform, the
    // field's name for the operator's log only.
    throw Object.assign(new AuthApiError(500, "unexpected_failure", "Unable to get SMS provider"), {
      cause: e,
    });
  }
}

/** Whether codes are checked by the provider (Twilio Verify without the hook) rather than by their hash. */
export const providerVerifies = (settings: AuthSettings) =>
  settings.hook_send_sms_enabled !== true && settings.sms_provider === "twilio_verify";

/** Asks Twilio Verify whether `code` is the one it sent to `phone`; a refusal is the platform's otp_expired. */
export async function verifyWithProvider(
  settings: AuthSettings,
  urls: SmsProviderUrls,
  phone: string,
  code: string,
): Promise<void> {
  const provider = providerFor(settings, urls);
  await provider.verify!(phone, code).catch((e: unknown) => {
    throw Object.assign(new AuthApiError(403, "otp_expired", "Token has expired or is invalid"), {
      cause: e,
    });
  });
}

/** What sending a code needs besides the database: the config, the provider URLs, the SMS rate limit. */
export interface SmsSender {
  settings: AuthSettings;
  urls: SmsProviderUrls;
  /** Counts one message against rate_limit_sms_sent (429 over_sms_send_rate_limit when over). */
  consumeSms: () => Promise<void>;
  ip?: string;
}

/**
 * Delivers `otp` to `phone`: the send-SMS hook (`{metadata, user, sms: {otp, phone, sms_type}}`, http(s)
 * signed or pg-functions within the caller's transaction) when enabled, else the provider with the
 * template's message. A failure throws, so the caller's transaction stores no code.
 */
export async function deliverSms(
  db: pg.PoolClient,
  sender: SmsSender,
  user: UserRow,
  sms: { phone: string; otp: string; channel: string; template: unknown; type?: "mfa"; what: string },
): Promise<string> {
  const { settings } = sender;
  if (settings.hook_send_sms_enabled === true) {
    const current = (await userById(db, user.id)) ?? user;
    await runHook(db, settings, "send_sms", {
      metadata: hookMetadata("send_sms", sender.ip),
      user: await apiUser(db, current),
      sms: { otp: sms.otp, phone: sms.phone, ...(sms.type ? { sms_type: sms.type } : {}) },
    });
    return "";
  }
  const provider = providerFor(settings, sender.urls);
  try {
    return await provider.send(sms.phone, smsMessage(sms.template, sms.otp), sms.channel, sms.otp);
  } catch (e) {
    if (!(e instanceof SmsProviderError)) throw e;
    throw new AuthApiError(422, "sms_send_failed", `Error sending ${sms.what} OTP to provider: ${e.message}`);
  }
}

export type PhoneOtpKind = "confirmation" | "phone_change" | "reauthentication";

const PHONE_COLUMNS: Record<PhoneOtpKind, { token: string; sentAt: string }> = {
  confirmation: { token: "confirmation_token", sentAt: "confirmation_sent_at" },
  phone_change: { token: "phone_change_token", sentAt: "phone_change_sent_at" },
  reauthentication: { token: "reauthentication_token", sentAt: "reauthentication_sent_at" },
};

/** The 429 of a code asked for again within `seconds` of the last one. */
export function checkFrequency(sentAt: Date | null, seconds: number): void {
  if (!sentAt) return;
  const left = sentAt.getTime() + seconds * 1000 - Date.now();
  if (left > 0) {
    throw new AuthApiError(
      429,
      "over_sms_send_rate_limit",
      `For security purposes, you can only request this after ${Math.ceil(left / 1000)} seconds.`,
    );
  }
}

/**
 * Sends a phone code of `kind` to `phone` within the caller's transaction, as the platform's
 * sendPhoneConfirmation: sms_max_frequency, a test number's fixed code (nothing sent), else
 * rate_limit_sms_sent (unless sms_autoconfirm), a new code of sms_otp_length delivered, then its hash, the
 * send time (and for a change the new number) and the one_time_tokens row stored. Answers the message id.
 */
export async function sendPhoneOtp(
  db: pg.PoolClient,
  sender: SmsSender,
  user: UserRow,
  phone: string,
  kind: PhoneOtpKind,
  channel: string,
): Promise<string> {
  const { settings } = sender;
  const columns = PHONE_COLUMNS[kind];
  const lastSent = (user as unknown as Record<string, Date | null>)[columns.sentAt];
  checkFrequency(lastSent, Number(settings.sms_max_frequency ?? 60));
  if (kind === "phone_change") user = await setUser(db, user.id, { phone_change: phone });
  let otp = testOtp(settings, phone);
  let messageId = otp ? "test-otp" : "";
  if (!otp) {
    if (!settings.sms_autoconfirm) await sender.consumeSms();
    otp = newOtp(otpLength(settings.sms_otp_length));
    messageId = await deliverSms(db, sender, user, {
      phone,
      otp,
      channel,
      template: settings.sms_template,
      what: kind,
    });
  }
  const hash = tokenHash(phone, otp);
  await setUser(db, user.id, { [columns.token]: hash, [columns.sentAt]: new Date() });
  await saveOneTimeToken(db, {
    userId: user.id,
    type: kind === "phone_change" ? "phone_change_token" : columns.token,
    hash,
    relatesTo: phone,
  });
  return messageId;
}
