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
