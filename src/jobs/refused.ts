/**
 * A job that cannot start for a reason the caller can fix or wait out: nothing to restore from (400), one
 * already running (409). The Management API answers it as it answers its own errors.
 */
export class JobRefused extends Error {
  constructor(
    readonly status: 400 | 409,
    message: string,
  ) {
    super(message);
  }
}
