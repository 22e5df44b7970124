import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";

/** The project's own sign-in providers (email, phone) as its config switches them, refused as the platform does. */

export function requireEmailProvider(settings: AuthSettings, what: "signups" | "logins"): void {
  if (settings.external_email_enabled === false) {
    throw new AuthApiError(422, "email_provider_disabled", `Email ${what} are disabled`);
  }
}

export function requirePhoneProvider(settings: AuthSettings, status: 400 | 422, message: string): void {
  if (settings.external_phone_enabled !== true) {
    throw new AuthApiError(status, "phone_provider_disabled", message);
  }
}
