import type { StrataConfig } from "../../config";

/**
 * The installation's own mail (invitations to organizations), through the operator's SMTP server
 * (`STRATA_SMTP_URL`). The server is the operator's choice, not a tenant's: it is reached as configured,
 * without the outbound policy that guards the projects' SMTP settings.
 */

export interface InstallationMail {
  to: string;
  subject: string;
  html: string;
}

/** Thrown when the SMTP server refused or could not be reached; `reason` is its reply, for the log only. */
export class InstallationMailError extends Error {
  constructor(readonly reason: string) {
    super("The installation's SMTP server did not take the mail");
  }
}

/** Whether the installation sends mail (else invitation links are answered to the inviter). */
export function mailConfigured(config: StrataConfig): boolean {
  return config.smtp.url !== undefined;
}

export async function sendInstallationMail(config: StrataConfig, mail: InstallationMail): Promise<void> {
  if (!config.smtp.url) throw new InstallationMailError("no SMTP server is configured");
  // Loaded with the first mail: an installation that sends none never holds the library.
  const { default: nodemailer } = await import("nodemailer");
  const transport = nodemailer.createTransport({
    url: config.smtp.url,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
  try {
    await transport.sendMail({ ...mail, from: config.smtp.sender });
  } catch (e) {
    // The reply of the server only: nodemailer's errors never carry the URL's credentials.
    throw new InstallationMailError((e as Error).message);
  } finally {
    transport.close();
  }
}
