import type pg from "pg";
import { RateLimiterRes } from "rate-limiter-flexible";
import { hashPassword, MAX_PASSWORD_BYTES, verifyPassword } from "../../auth/passwords";
import { postgresRateLimiter } from "../../http/rateLimiter";
import { randomSecret, sha256 } from "../../platform/ids";
import { HttpError } from "../http";
import { normalEmail, userByEmail, type UserRow } from "./users";

/** Failed sign-ins allowed per email in the window; a successful one starts the count again. */
export const SIGN_IN_FAILURES = 5;
export const SIGN_IN_WINDOW_SECONDS = 15 * 60;

/** One answer for an unknown email, a user without a password and a wrong password. */
const INVALID = "Invalid login credentials";

let dummy: Promise<string> | undefined;
/** A hash no password opens, checked for an unknown email so that it takes as long as a known one. */
function dummyHash(): Promise<string> {
  return (dummy ??= hashPassword(randomSecret()));
}

/**
 * Checks an email and password. Every attempt counts against the email (counted by its hash, known or not,
 * so the limit tells nothing about which emails exist) until one succeeds; past `SIGN_IN_FAILURES` the email
 * answers 429 for the rest of the window, whatever the password. Route limits count attempts per address.
 */
export function passwordChecker(db: pg.Pool): (email: string, password: string) => Promise<UserRow> {
  const attempts = postgresRateLimiter(db, {
    keyPrefix: "mgmt-sign-in-email",
    points: SIGN_IN_FAILURES,
    seconds: SIGN_IN_WINDOW_SECONDS,
  });
  return async (email, password) => {
    const key = sha256(normalEmail(email));
    try {
      await attempts.consume(key);
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      throw new HttpError(
        429,
        `Too many sign-in attempts for this email: retry in ${Math.ceil(e.msBeforeNext / 1000)} seconds`,
      );
    }
    const user = await userByEmail(db, email);
    // bcrypt reads 72 bytes: a longer attempt could match on its start only.
    const fits = Buffer.byteLength(password) <= MAX_PASSWORD_BYTES;
    const matches = await verifyPassword(password, user?.password_hash ?? (await dummyHash()));
    if (!user?.password_hash || !fits || !matches) throw new HttpError(400, INVALID);
    await attempts.delete(key);
    return user;
  };
}
