/** An error in the auth server's shape: `{code, error_code, msg}` (plus `weak_password` for weak passwords). */
export class AuthApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** The largest request body /auth/v1 reads: the platform's auth server reads every body through 1 MB. */
export const AUTH_BODY_LIMIT = 1 << 20;

/** A body over AUTH_BODY_LIMIT, answered as the platform's auth server answers it. */
export const bodyTooLarge = () =>
  new AuthApiError(413, "request_entity_too_large", `Request body too large (max ${AUTH_BODY_LIMIT} bytes)`);

/** Refusals that several endpoints answer alike. */
export const userNotFound = () => new AuthApiError(404, "user_not_found", "User not found");
export const factorNotFound = () => new AuthApiError(404, "mfa_factor_not_found", "Factor not found");
export const passkeyNotFound = () => new AuthApiError(404, "validation_failed", "Passkey not found");
export const emailExists = () =>
  new AuthApiError(422, "email_exists", "A user with this email address has already been registered");
export const signupDisabled = () =>
  new AuthApiError(422, "signup_disabled", "Signups not allowed for this instance");
export const phoneExists = () =>
  new AuthApiError(422, "phone_exists", "A user with this phone number has already been registered");
/** The refusal of a body with both an email address and a phone number (`ending` as the platform's routes say). */
export const emailOrPhoneOnly = (ending: string) =>
  new AuthApiError(
    400,
    "validation_failed",
    `Only an email address or phone number should be provided${ending}`,
  );
