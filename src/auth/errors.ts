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
