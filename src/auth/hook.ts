import type pg from "pg";
import type { AuthSettings } from "./authConfig";
import { AuthApiError } from "./errors";

const IDENT = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/**
 * The custom access token hook (hook_custom_access_token_uri, `pg-functions://<db>/<schema>/<function>`):
 * the function gets `{user_id, claims, authentication_method}` and answers `{claims}` that replace the
 * token's claims, or `{error: {http_code, message}}`.
 */
export async function runAccessTokenHook(
  pool: pg.Pool,
  settings: AuthSettings,
  input: { user_id: string; claims: Record<string, unknown>; authentication_method: string },
): Promise<Record<string, unknown>> {
  if (!settings.hook_custom_access_token_enabled) return input.claims;
  const uri = String(settings.hook_custom_access_token_uri ?? "");
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
  const claims = output?.claims;
  if (!claims || typeof claims !== "object" || Array.isArray(claims)) {
    throw new AuthApiError(500, "unexpected_failure", "output claims do not conform to the expected schema");
  }
  return claims as Record<string, unknown>;
}
