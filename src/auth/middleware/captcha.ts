import type { AuthCall } from "../call";
import { AuthApiError } from "../errors";

/**
 * CAPTCHA protection as the platform's auth server applies it (security_captcha_*): the routes the table
 * marks `captcha` (those that sign up, sign in or send a message) need `gotrue_meta_security.captcha_token`
 * in the body, checked with the provider's siteverify endpoint (the project's secret, the token and the
 * client's address). Callers with the service key skip it, and so do the /token grants that only continue
 * a sign-in (refresh_token, pkce, id_token).
 */
export type CaptchaProvider = "hcaptcha" | "turnstile";

/** The providers' public siteverify endpoints; an operator can point them elsewhere (a proxy, a test receiver). */
export const CAPTCHA_URLS: Record<CaptchaProvider, string> = {
  hcaptcha: "https://hcaptcha.com/siteverify",
  turnstile: "https://challenges.cloudflare.com/turnstile/v0/siteverify",
};

const TIMEOUT_MS = 10_000;
const SKIPPED_GRANTS = new Set(["pkce", "refresh_token", "id_token"]);

export async function verifyCaptcha({ req, settings, key, ctx }: AuthCall): Promise<void> {
  if (settings.security_captcha_enabled !== true) return;
  if (key.role === "service_role") return;
  if (req.path === "/token" && SKIPPED_GRANTS.has(String(req.query.grant_type))) return;
  const security = (req.body as Record<string, unknown> | undefined)?.gotrue_meta_security;
  const raw = (security as Record<string, unknown> | undefined)?.captcha_token;
  const token = typeof raw === "string" ? raw.trim() : "";
  if (!token) {
    throw new AuthApiError(
      400,
      "captcha_failed",
      "captcha protection: request disallowed (no captcha_token found)",
    );
  }
  const provider = settings.security_captcha_provider;
  const secret =
    typeof settings.security_captcha_secret === "string" ? settings.security_captcha_secret.trim() : "";
  if ((provider !== "hcaptcha" && provider !== "turnstile") || !secret) {
    // A config the Management API refuses to store; answered as the platform's failed verification.
    throw new AuthApiError(500, "unexpected_failure", "captcha verification process failed");
  }
  const form = new URLSearchParams({ secret, response: token, remoteip: req.ip ?? "" });
  let result: { success?: unknown; "error-codes"?: unknown };
  try {
    const res = await fetch(ctx.config.captchaUrls[provider] ?? CAPTCHA_URLS[provider], {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    result = (await res.json()) as typeof result;
  } catch {
    throw new AuthApiError(500, "unexpected_failure", "captcha verification process failed");
  }
  if (result?.success !== true) {
    const codes = Array.isArray(result?.["error-codes"]) ? result["error-codes"].map(String) : [];
    throw new AuthApiError(
      400,
      "captcha_failed",
      `captcha protection: request disallowed (${codes.join(", ")})`,
    );
  }
}
