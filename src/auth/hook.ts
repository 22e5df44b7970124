import { randomUUID } from "node:crypto";
import type pg from "pg";
import { Webhook } from "standardwebhooks";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";
import { fetchPublicJson } from "./publicFetch";

const IDENT = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/**
 * POSTs `input` to an HTTP hook as the platform does (Standard Webhooks): `webhook-id`, `webhook-timestamp`
 * and `webhook-signature` with one `v1,<signature>` per secret of `secrets` (`v1,whsec_<base64>`, several
 * separated by `|`). https only, plain http only to loopback, never to an internal address
 * (fetchPublicJson). Answers the hook's JSON (null for 204); `{error: {http_code, message}}` becomes that error.
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

/**
 * The custom access token hook (hook_custom_access_token_uri, `pg-functions://<db>/<schema>/<function>`
 * or an http(s) URL signed with hook_custom_access_token_secrets): it gets
 * `{user_id, claims, authentication_method}` and answers `{claims}` that replace the token's claims, or
 * `{error: {http_code, message}}`.
 */
export async function runAccessTokenHook(
  pool: pg.Pool,
  settings: AuthSettings,
  input: { user_id: string; claims: Record<string, unknown>; authentication_method: string },
): Promise<Record<string, unknown>> {
  if (!settings.hook_custom_access_token_enabled) return input.claims;
  const uri = String(settings.hook_custom_access_token_uri ?? "");
  if (/^https?:\/\//.test(uri)) {
    const output = await runHttpHook(uri, settings.hook_custom_access_token_secrets, input);
    return claimsOf(output);
  }
  const match = /^pg-functions:\/\/[^/]+\/([^/]+)\/([^/]+)$/.exec(uri);
  if (!match || !IDENT.test(match[1]) || !IDENT.test(match[2])) {
    throw new AuthApiError(500, "hook_configuration_error", "Invalid custom access token hook URI");
  }
  const { rows } = await pool
    .query(`select "${match[1]}"."${match[2]}"($1::jsonb) as output`, [JSON.stringify(input)])
    .catch(() => {
      throw new AuthApiError(500, "unexpected_failure", "Error running hook URI: " + uri);
    });
  const output = rows[0]?.output as {
    claims?: unknown;
    error?: { http_code?: number; message?: string };
  } | null;
  if (output?.error) {
    const status = Number(output.error.http_code) || 500;
    throw new AuthApiError(status, "hook_error", String(output.error.message ?? "Error from the hook"));
  }
  return claimsOf(output);
}

function claimsOf(output: unknown): Record<string, unknown> {
  const claims = (output as { claims?: unknown } | null)?.claims;
  if (!claims || typeof claims !== "object" || Array.isArray(claims)) {
    throw new AuthApiError(500, "unexpected_failure", "output claims do not conform to the expected schema");
  }
  return claims as Record<string, unknown>;
}
