import { withAdminTransaction } from "../db/transaction";
import { randomUUID } from "node:crypto";
import type pg from "pg";
import { Webhook } from "standardwebhooks";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";
import { fetchPublicJson } from "../net/outbound";
import { endSessions } from "./store/sessions";
import { toUser, type UserRow } from "./store/users";

const IDENT = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/**
 * POSTs `input` to an HTTP hook as the platform does (Standard Webhooks): `webhook-id`, `webhook-timestamp`
 * and `webhook-signature` with one `v1,<signature>` per secret of `secrets` (`v1,whsec_<base64>`, several
 * separated by `|`), over https to a public address only (the outbound policy, net/outbound.ts). Answers the
 * hook's JSON (null for 204); `{error: {http_code, message}}` becomes that error.
 */
export async function runHttpHook(uri: string, secrets: unknown, input: unknown): Promise<unknown> {
  const keys = String(secrets ?? "")
    .split("|")
    .filter(Boolean);
  if (!keys.length || !keys.every((k) => k.startsWith("v1,"))) {
    throw new AuthApiError(500, "hook_configuration_error", "Invalid hook secrets: expected v1,whsec_...");
  }
  const payload = JSON.stringify(input);
  const id = randomUUID();
  const now = new Date();
  let signatures: string[];
  try {
    signatures = keys.map((k) => new Webhook(k.slice(3)).sign(id, now, payload));
  } catch {
    throw new AuthApiError(500, "hook_configuration_error", "Invalid hook secrets: expected v1,whsec_...");
  }
  const output = await fetchPublicJson(uri, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": signatures.join(" "),
    },
    body: payload,
  }).catch(() => {
    // The reason (address, status) is the operator's to find in the hook's own logs, not the caller's.
    throw new AuthApiError(500, "unexpected_failure", "Error running hook URI: " + uri);
  });
  const error = (output as { error?: { http_code?: number; message?: string } } | null)?.error;
  if (error?.message) {
    throw new AuthApiError(Number(error.http_code) || 500, "hook_error", String(error.message));
  }
  return output;
}

/** The hooks of the auth config (`hook_<name>_{enabled,uri,secrets}`) and their payload names. */
const HOOK_NAMES = {
  custom_access_token: "customize-access-token",
  mfa_verification_attempt: "mfa-verification",
  password_verification_attempt: "password-verification",
  before_user_created: "before-user-created",
  after_user_created: "after-user-created",
  send_email: "send-email",
  send_sms: "send-sms",
} as const;
export type HookName = keyof typeof HOOK_NAMES;

/** A pg-functions hook gets this long before Postgres cancels it (the platform's default hook timeout). */
const PG_HOOK_TIMEOUT_MS = 2000;

/** The `metadata` every hook payload carries, as the platform sends it. */
export function hookMetadata(name: HookName, ip: string | undefined) {
  return {
    uuid: randomUUID(),
    time: new Date().toISOString(),
    name: HOOK_NAMES[name],
    ...(ip ? { ip_address: ip } : {}),
  };
}

export const hookEnabled = (settings: AuthSettings, name: HookName) =>
  settings[`hook_${name}_enabled`] === true;

/**
 * Runs the `name` hook with `input` when it is enabled (else answers undefined): an http(s) URL signed as
 * Standard Webhooks with its secrets, or `pg-functions://<db>/<schema>/<function>` called in the project's
 * database. `{error: {http_code, message}}` in its answer becomes that error.
 */
export async function runHook(
  pool: pg.Pool | pg.PoolClient,
  settings: AuthSettings,
  name: HookName,
  input: unknown,
): Promise<Record<string, unknown> | null | undefined> {
  if (!hookEnabled(settings, name)) return undefined;
  const uri = String(settings[`hook_${name}_uri`] ?? "");
  if (/^https?:\/\//.test(uri)) {
    return (await runHttpHook(uri, settings[`hook_${name}_secrets`], input)) as Record<
      string,
      unknown
    > | null;
  }
  const match = /^pg-functions:\/\/[^/]+\/([^/]+)\/([^/]+)$/.exec(uri);
  if (!match || !IDENT.test(match[1]) || !IDENT.test(match[2])) {
    throw new AuthApiError(500, "hook_configuration_error", `Invalid ${HOOK_NAMES[name]} hook URI`);
  }
  const call = `select "${match[1]}"."${match[2]}"($1::jsonb) as output`;
  let output: { error?: { http_code?: number; message?: string } } | null;
  try {
    // A client inside the caller's transaction (the send-email hook): the function sees its writes, and its
    // failure rolls them back. Otherwise a transaction of its own on the pool.
    output =
      "totalCount" in pool
        ? await withAdminTransaction(pool, (client) => callPgHook(client, call, input))
        : await callPgHook(pool, call, input);
  } catch {
    throw new AuthApiError(500, "unexpected_failure", "Error running hook URI: " + uri);
  }
  if (output?.error?.message) {
    const status = Number(output.error.http_code) || 500;
    throw new AuthApiError(status, "hook_error", String(output.error.message));
  }
  return output as Record<string, unknown> | null;
}

/**
 * Calls a pg-functions hook inside the transaction open on `client` (the auth service's login, so the
 * function runs as that role), with the hook timeout for the call only. Whatever the function set for the
 * session (search_path, timeouts, a role) is undone before the next statement: the connection's later
 * statements are the auth service's, resolved as its pool pinned them.
 */
async function callPgHook(client: pg.PoolClient, call: string, input: unknown) {
  await client.query("select set_config('statement_timeout', $1, true)", [String(PG_HOOK_TIMEOUT_MS)]);
  const { rows } = await client.query(call, [JSON.stringify(input)]);
  await client.query("reset all; reset role");
  return rows[0]?.output ?? null;
}

/**
 * The custom access token hook: it gets `{user_id, claims, authentication_method}` and answers `{claims}`
 * that replace the token's claims, or `{error: {http_code, message}}`.
 */
export async function runAccessTokenHook(
  pool: pg.Pool,
  settings: AuthSettings,
  input: { user_id: string; claims: Record<string, unknown>; authentication_method: string },
): Promise<Record<string, unknown>> {
  const output = await runHook(pool, settings, "custom_access_token", input);
  return output === undefined ? input.claims : claimsOf(output);
}

/**
 * The MFA and password verification attempt hooks: told whether an attempt was valid, they answer
 * `{decision: "reject" | "continue", message}`; a rejection ends the user's sessions (MFA always, password
 * when `should_logout_user`) and refuses the attempt with the hook's message.
 */
export async function checkVerificationAttempt(
  pool: pg.Pool,
  settings: AuthSettings,
  name: "mfa_verification_attempt" | "password_verification_attempt",
  input: Record<string, unknown>,
  ip: string | undefined,
): Promise<void> {
  const output = await runHook(pool, settings, name, { metadata: hookMetadata(name, ip), ...input });
  if (output?.decision !== "reject") return;
  const message = typeof output.message === "string" && output.message ? output.message : undefined;
  if (name === "mfa_verification_attempt" || output.should_logout_user === true) {
    await endSessions(pool, String(input.user_id), null, "global");
  }
  if (name === "mfa_verification_attempt") {
    throw new AuthApiError(
      403,
      "mfa_verification_rejected",
      message ?? "Further MFA verification attempts will be rejected.",
    );
  }
  throw new AuthApiError(
    400,
    "invalid_credentials",
    message ?? "Further password verification attempts will be rejected.",
  );
}

function claimsOf(output: unknown): Record<string, unknown> {
  const claims = (output as { claims?: unknown } | null)?.claims;
  if (!claims || typeof claims !== "object" || Array.isArray(claims)) {
    throw new AuthApiError(500, "unexpected_failure", "output claims do not conform to the expected schema");
  }
  return claims as Record<string, unknown>;
}

/** A user-created hook with the user's row (the hook's payload is built only when it is enabled). */
function userCreatedHook(name: "before_user_created" | "after_user_created") {
  return async (pool: pg.Pool, settings: AuthSettings, row: UserRow, ip: string | undefined) => {
    if (!hookEnabled(settings, name)) return;
    await runHook(pool, settings, name, { metadata: hookMetadata(name, ip), user: toUser(row) });
  };
}

/**
 * The before-user-created hook, called with the new user's row inside the transaction that inserted it:
 * an error answer refuses the sign-up and the transaction writes nothing.
 */
export const beforeUserCreated = userCreatedHook("before_user_created");

/** The after-user-created hook, once the user is committed: its error is the caller's, the user stays. */
export const afterUserCreated = userCreatedHook("after_user_created");
