import { createHash, randomInt } from "node:crypto";
import type pg from "pg";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";
import { hookMetadata, runHook } from "./hook";
import { MailError, sendAuthMail, type MailKind } from "./mailer";
import { startFlow } from "./store/flowState";
import { upsertEmailIdentity } from "./store/identities";
import { deleteEmailChangeTokens, deleteOneTimeToken, saveOneTimeToken } from "./store/oneTimeTokens";
import {
  apiUser,
  lockUsersByAddress,
  lockUsersByTokenHash,
  makeEmailUser,
  setUser,
  userById,
  type UserRow,
} from "./store/users";

/** The platform's token hash: SHA-224 of the address and the code, hex. The link carries the hash. */
export function tokenHash(email: string, otp: string): string {
  return createHash("sha224")
    .update(email + otp)
    .digest("hex");
}

function newOtp(length: number): string {
  let otp = "";
  for (let i = 0; i < length; i++) otp += String(randomInt(10));
  return otp;
}

/** Which user columns hold the token and its send time, per kind of mail. */
const COLUMNS: Record<MailKind, { token: string; sentAt: string; ott: string }> = {
  confirmation: { token: "confirmation_token", sentAt: "confirmation_sent_at", ott: "confirmation_token" },
  invite: { token: "confirmation_token", sentAt: "confirmation_sent_at", ott: "confirmation_token" },
  magic_link: { token: "recovery_token", sentAt: "recovery_sent_at", ott: "recovery_token" },
  recovery: { token: "recovery_token", sentAt: "recovery_sent_at", ott: "recovery_token" },
  email_change: {
    token: "email_change_token_new",
    sentAt: "email_change_sent_at",
    ott: "email_change_token_new",
  },
  reauthentication: {
    token: "reauthentication_token",
    sentAt: "reauthentication_sent_at",
    ott: "reauthentication_token",
  },
};

/** The verification `type` a link of each kind carries. */
const LINK_TYPES: Record<MailKind, string> = {
  confirmation: "signup",
  invite: "invite",
  magic_link: "magiclink",
  recovery: "recovery",
  email_change: "email_change",
  reauthentication: "reauthentication",
};

export interface Pkce {
  codeChallenge: string;
  method: "s256" | "plain";
}

export interface IssueOptions {
  apiUrl: string;
  redirectTo: string;
  pkce?: Pkce;
  /** Count the mail against rate_limit_email_sent (throws 429 when over); absent for generated links. */
  consumeSend?: () => Promise<void>;
  /** Send the mail (else only the link and code are made, for the admin generateLink). */
  send: boolean;
  /** email_change: the address a token is for (current or new) and which token column it fills. */
  to?: string;
  tokenColumn?: "email_change_token_new" | "email_change_token_current";
}

/** The link and code of one issued token. */
export interface Issued {
  otp: string;
  hashedToken: string;
  link: string;
  type: string;
}

/**
 * Issues a token of `kind` for `user` within the caller's transaction: checks smtp_max_frequency, stores
 * the token hash and send time (and the one_time_tokens row), starts a PKCE flow when asked, counts and
 * sends the mail. Any failure throws and the transaction rolls everything back.
 */
export async function issueToken(
  db: pg.PoolClient,
  settings: AuthSettings,
  user: UserRow,
  kind: MailKind,
  options: IssueOptions,
): Promise<Issued> {
  const columns = COLUMNS[kind];
  const to = options.to ?? user.email ?? "";
  if (options.send) {
    const lastSent = (user as unknown as Record<string, Date | null>)[columns.sentAt];
    const minGap = Number(settings.smtp_max_frequency ?? 60);
    if (
      lastSent &&
      Date.now() - lastSent.getTime() < minGap * 1000 &&
      !options.tokenColumn?.endsWith("current")
    ) {
      const wait = Math.ceil(minGap - (Date.now() - lastSent.getTime()) / 1000);
      throw new AuthApiError(
        429,
        "over_email_send_rate_limit",
        `For security purposes, you can only request this after ${wait} seconds.`,
      );
    }
  }
  const otp = newOtp(Number(settings.mailer_otp_length ?? 6));
  const hash = tokenHash(to, otp);
  const type = LINK_TYPES[kind];
  const stored = options.pkce ? `pkce_${hash}` : hash;
  const tokenColumn = options.tokenColumn ?? columns.token;
  await setUser(db, user.id, { [tokenColumn]: stored, [columns.sentAt]: new Date() });
  await saveOneTimeToken(db, {
    userId: user.id,
    type: options.tokenColumn ?? columns.ott,
    hash: stored,
    relatesTo: to,
  });
  if (options.pkce) {
    await startFlow(db, {
      userId: user.id,
      challenge: options.pkce.codeChallenge,
      challengeMethod: options.pkce.method,
      providerType: "email",
      authenticationMethod: type,
    });
  }
  const link =
    `${options.apiUrl}/verify?token=${encodeURIComponent(stored)}&type=${type}` +
    `&redirect_to=${encodeURIComponent(options.redirectTo)}`;
  if (options.send) {
    await options.consumeSend?.();
    if (settings.hook_send_email_enabled) {
      await sendEmailHook(db, settings, user.id, {
        token: otp,
        token_hash: stored,
        redirect_to: options.redirectTo,
        email_action_type: type,
        site_url: String(settings.site_url),
        token_new: "",
        token_hash_new: "",
      });
      return { otp, hashedToken: hash, link, type };
    }
    await sendAuthMail(settings, kind, to, {
      ConfirmationURL: link,
      Token: otp,
      TokenHash: hash,
      SiteURL: String(settings.site_url),
      Email: user.email ?? to,
      NewEmail: user.email_change ?? undefined,
      RedirectTo: options.redirectTo,
      Data: user.raw_user_meta_data,
    }).catch((e: unknown) => {
      if (e instanceof MailError) {
        // The SMTP server's reply goes to the log (never the credentials); the caller learns only that it failed.
        throw Object.assign(new AuthApiError(500, "unexpected_failure", `Error sending ${kind} email`), {
          cause: e,
        });
      }
      throw e;
    });
  }
  return { otp, hashedToken: hash, link, type };
}

/**
 * The send-email hook (hook_send_email_enabled, hook_send_email_uri: an http(s) URL signed with
 * hook_send_email_secrets, or a pg-functions:// function run in the request's transaction): it gets
 * `{user, email_data}` as from the platform and sends the mail itself; no mail goes over SMTP. A failing
 * hook fails the request, so its transaction (the token) is rolled back.
 */
async function sendEmailHook(
  db: pg.PoolClient,
  settings: AuthSettings,
  userId: string,
  emailData: Record<string, string>,
): Promise<void> {
  const user = (await userById(db, userId))!;
  await runHook(db, settings, "send_email", {
    metadata: hookMetadata("send_email", undefined),
    user: await apiUser(db, user),
    email_data: emailData,
  });
}

export type VerifyType = "signup" | "invite" | "magiclink" | "recovery" | "email_change" | "email";

const TYPE_COLUMNS: Record<VerifyType, string[]> = {
  signup: ["confirmation_token"],
  invite: ["confirmation_token"],
  magiclink: ["recovery_token"],
  recovery: ["recovery_token"],
  email: ["confirmation_token", "recovery_token"],
  email_change: ["email_change_token_new", "email_change_token_current"],
};

const SENT_AT: Record<string, string> = {
  confirmation_token: "confirmation_sent_at",
  recovery_token: "recovery_sent_at",
  email_change_token_new: "email_change_sent_at",
  email_change_token_current: "email_change_sent_at",
};

export const otpExpired = () => new AuthApiError(403, "otp_expired", "Token has expired or is invalid");

/**
 * Finds the user a token (a link's hash, or an address and code) belongs to, locked, and which column
 * matched. Throws otp_expired when none matches or the token is older than mailer_otp_exp.
 */
export async function findToken(
  db: pg.PoolClient,
  settings: AuthSettings,
  type: VerifyType,
  token: { hash: string } | { email: string; otp: string },
): Promise<{ user: UserRow; column: string; pkce: boolean }> {
  const columns = TYPE_COLUMNS[type];
  const candidates =
    "hash" in token
      ? await lockUsersByTokenHash(db, columns, token.hash)
      : await lockUsersByAddress(db, token.email);
  for (const user of candidates) {
    for (const column of columns) {
      const stored = (user as unknown as Record<string, string | null>)[column];
      if (!stored) continue;
      let match: boolean;
      if ("hash" in token) match = stored === token.hash;
      else {
        const address = column === "email_change_token_new" ? user.email_change : user.email;
        const hash = tokenHash(address ?? "", token.otp);
        match = stored === hash || stored === `pkce_${hash}`;
      }
      if (!match) continue;
      const sentAt = (user as unknown as Record<string, Date | null>)[SENT_AT[column]];
      const ttl = Number(settings.mailer_otp_exp ?? 3600) * 1000;
      if (!sentAt || Date.now() - sentAt.getTime() > ttl) throw otpExpired();
      return { user, column, pkce: stored.startsWith("pkce_") };
    }
  }
  throw otpExpired();
}

/** What a verified token did: signed the user in, or (secure email change) only recorded one confirmation. */
export type Verified = { kind: "signed_in"; user: UserRow } | { kind: "half_confirmed"; user: UserRow };

/** Applies a verified token: confirms the address, clears the token, applies an email change. */
export async function applyToken(
  db: pg.PoolClient,
  settings: AuthSettings,
  user: UserRow,
  column: string,
): Promise<Verified> {
  if (column === "email_change_token_new" || column === "email_change_token_current") {
    const other =
      column === "email_change_token_new" ? "email_change_token_current" : "email_change_token_new";
    const otherPending = Boolean((user as unknown as Record<string, string | null>)[other]);
    if (
      otherPending &&
      user.email_change_confirm_status === 0 &&
      settings.mailer_secure_email_change_enabled
    ) {
      const updated = await setUser(db, user.id, { [column]: null, email_change_confirm_status: 1 });
      return { kind: "half_confirmed", user: updated };
    }
    const updated = await setUser(db, user.id, {
      email: user.email_change,
      email_change: null,
      email_change_token_new: null,
      email_change_token_current: null,
      email_change_confirm_status: 0,
      email_change_sent_at: null,
      is_anonymous: false,
      email_confirmed_at: user.email_confirmed_at ?? new Date(),
    });
    if (user.is_anonymous) await makeEmailUser(db, user.id);
    await deleteEmailChangeTokens(db, user.id);
    await upsertEmailIdentity(db, updated);
    return { kind: "signed_in", user: updated };
  }
  const updated = await setUser(db, user.id, {
    [column]: null,
    email_confirmed_at: user.email_confirmed_at ?? new Date(),
  });
  await deleteOneTimeToken(db, user.id, column);
  await upsertEmailIdentity(db, updated);
  return { kind: "signed_in", user: updated };
}

/** Sends the email change mail(s): to the new address, and (secure change) to the current one too. */
export async function sendEmailChange(
  db: pg.PoolClient,
  settings: AuthSettings,
  user: UserRow,
  options: IssueOptions,
): Promise<void> {
  await issueToken(db, settings, user, "email_change", {
    ...options,
    to: user.email_change!,
    tokenColumn: "email_change_token_new",
  });
  if (settings.mailer_secure_email_change_enabled && user.email) {
    await issueToken(db, settings, (await userById(db, user.id))!, "email_change", {
      ...options,
      pkce: undefined,
      to: user.email,
      tokenColumn: "email_change_token_current",
    });
  } else {
    await setUser(db, user.id, { email_change_token_current: null });
  }
}
