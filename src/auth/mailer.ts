import { isIP } from "node:net";
import { approvedAddress } from "../net/outbound";
import type { AuthSettings } from "./authConfig";

/** The kinds of mail the auth endpoints send, with the platform's default subject and template of each. */
export const MAIL_DEFAULTS = {
  confirmation: {
    subject: "Confirm Your Email",
    content:
      '<h2>Confirm your email</h2><p>Follow this link to confirm your email:</p><p><a href="{{ .ConfirmationURL }}">Confirm your email address</a></p><p>Alternatively, enter the code: {{ .Token }}</p>',
  },
  invite: {
    subject: "You have been invited",
    content:
      '<h2>You have been invited</h2><p>You have been invited to create a user on {{ .SiteURL }}. Follow this link to accept the invite:</p><p><a href="{{ .ConfirmationURL }}">Accept the invite</a></p><p>Alternatively, enter the code: {{ .Token }}</p>',
  },
  magic_link: {
    subject: "Your Magic Link",
    content:
      '<h2>Magic Link</h2><p>Follow this link to login:</p><p><a href="{{ .ConfirmationURL }}">Log In</a></p><p>Alternatively, enter the code: {{ .Token }}</p>',
  },
  recovery: {
    subject: "Reset Your Password",
    content:
      '<h2>Reset Password</h2><p>Follow this link to reset the password for your user:</p><p><a href="{{ .ConfirmationURL }}">Reset Password</a></p><p>Alternatively, enter the code: {{ .Token }}</p>',
  },
  email_change: {
    subject: "Confirm Email Change",
    content:
      '<h2>Confirm email address change</h2><p>Follow this link to confirm the update of your email address from {{ .Email }} to {{ .NewEmail }}:</p><p><a href="{{ .ConfirmationURL }}">Change email address</a></p><p>Alternatively, enter the code: {{ .Token }}</p>',
  },
  reauthentication: {
    subject: "Confirm reauthentication",
    content: "<h2>Confirm reauthentication</h2><p>Enter the code: {{ .Token }}</p>",
  },
} as const;

export type MailKind = keyof typeof MAIL_DEFAULTS;

export interface MailValues {
  ConfirmationURL?: string;
  Token?: string;
  TokenHash?: string;
  SiteURL: string;
  Email: string;
  NewEmail?: string;
  RedirectTo?: string;
  Data?: Record<string, unknown>;
}

/** Thrown when the project has no SMTP server or it refused the mail; the caller answers 500 and rolls back. */
export class MailError extends Error {}

function escapeHtml(value: string): string {
  return value.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" })[c]!,
  );
}

/** Fills the `{{ .Name }}` and `{{ .Data.key }}` fields of a platform mail template, HTML-escaped. */
export function renderTemplate(template: string, values: MailValues, html = true): string {
  return template.replace(/\{\{\s*\.([A-Za-z]+)((?:\.[A-Za-z0-9_]+)*)\s*\}\}/g, (_m, name: string, rest) => {
    let value: unknown = (values as unknown as Record<string, unknown>)[name];
    for (const key of String(rest).split(".").filter(Boolean)) {
      value = value && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined;
    }
    if (value === undefined || value === null) return "";
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return html ? escapeHtml(text) : text;
  });
}

/**
 * Sends one auth mail through the project's SMTP server (smtp_host, smtp_port, smtp_user, smtp_pass), from
 * smtp_sender_name <smtp_admin_email>, with the configured subject and template of its kind. The host is a
 * tenant's choice: it is reached under the outbound policy as a mail relay (a public address, or this
 * machine's or a private network's MTA, as self-hosted mail often is; never link-local or reserved ranges; the
 * connection made to the address approved, TLS verified against the name).
 */
export async function sendAuthMail(
  settings: AuthSettings,
  kind: MailKind,
  to: string,
  values: MailValues,
): Promise<void> {
  const host = settings.smtp_host;
  if (typeof host !== "string" || !host) throw new MailError("no SMTP server is configured");
  const port = Number(settings.smtp_port ?? 587);
  const subject = (settings[`mailer_subjects_${kind}`] as string | null) || MAIL_DEFAULTS[kind].subject;
  const template =
    (settings[`mailer_templates_${kind}_content`] as string | null) || MAIL_DEFAULTS[kind].content;
  const user = typeof settings.smtp_user === "string" && settings.smtp_user ? settings.smtp_user : undefined;
  let approved: string;
  try {
    approved = (await approvedAddress(host, { mailRelay: true })).address;
  } catch (e) {
    throw new MailError(`SMTP server not reached: ${(e as Error).message}`);
  }
  // Loaded with the first mail: a project that sends none never holds the library.
  const { default: nodemailer } = await import("nodemailer");
  const transport = nodemailer.createTransport({
    host: approved,
    servername: isIP(host) ? undefined : host,
    port,
    secure: port === 465,
    auth: user ? { user, pass: String(settings.smtp_pass ?? "") } : undefined,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
  const address = (settings.smtp_admin_email as string | null) || "noreply@localhost";
  const name = (settings.smtp_sender_name as string | null) || undefined;
  try {
    await transport.sendMail({
      from: name ? { name, address } : address,
      to,
      subject: renderTemplate(subject, values, false),
      html: renderTemplate(template, values),
    });
  } catch (e) {
    // Only the SMTP server's reply is kept: the error never carries the credentials.
    throw new MailError(`SMTP server refused the mail: ${(e as Error).message}`);
  } finally {
    transport.close();
  }
}
