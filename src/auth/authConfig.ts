import type pg from "pg";
import { authFieldPurpose, isSealed, isSecretAuthField, kekOf } from "../platform/kek";

/**
 * Defaults of the auth config fields Strata gives a value to; every other field of the spec is null until
 * set. Sign-ups are confirmed at once (mailer_autoconfirm) until the project sets an SMTP server and turns
 * it off; mail then goes through smtp_host with the mailer_* subjects and templates.
 */
export const AUTH_CONFIG_DEFAULTS: Record<string, unknown> = {
  site_url: "http://localhost:3000",
  uri_allow_list: "",
  disable_signup: false,
  external_email_enabled: true,
  external_phone_enabled: false,
  external_anonymous_users_enabled: false,
  jwt_exp: 3600,
  mailer_autoconfirm: true,
  mailer_otp_exp: 3600,
  mailer_otp_length: 6,
  mailer_secure_email_change_enabled: true,
  smtp_max_frequency: 60,
  password_min_length: 6,
  password_required_characters: "",
  security_update_password_require_reauthentication: false,
  security_captcha_enabled: false,
  security_captcha_provider: "hcaptcha",
  mfa_totp_enroll_enabled: true,
  mfa_totp_verify_enabled: true,
  mfa_max_enrolled_factors: 10,
  mfa_web_authn_enroll_enabled: false,
  mfa_web_authn_verify_enabled: false,
  hook_custom_access_token_enabled: false,
  password_hibp_enabled: false,
  refresh_token_rotation_enabled: true,
  security_refresh_token_reuse_interval: 10,
  rate_limit_anonymous_users: 30,
  rate_limit_email_sent: 2,
  rate_limit_sms_sent: 30,
  sms_autoconfirm: false,
  sms_provider: "twilio",
  sms_otp_exp: 60,
  sms_otp_length: 6,
  sms_max_frequency: 60,
  sms_template: "Your code is {{ .Code }}",
  mfa_phone_enroll_enabled: false,
  mfa_phone_verify_enabled: false,
  mfa_phone_otp_length: 6,
  mfa_phone_max_frequency: 60,
  mfa_phone_template: "Your code is {{ .Code }}",
  hook_send_sms_enabled: false,
  rate_limit_token_refresh: 150,
  rate_limit_verify: 30,
  rate_limit_otp: 30,
  rate_limit_web3: 30,
  saml_enabled: false,
  saml_allow_encrypted_assertions: false,
  custom_oauth_max_providers: 0,
  // Features Strata's auth server does not have: off, as clients of the config (the CLI) expect a boolean.
  custom_oauth_enabled: false,
  passkey_enabled: false,
  oauth_server_allow_dynamic_registration: false,
  sessions_single_per_user: false,
  smtp_port: null,
};

/** The auth settings the /auth/v1 endpoints honour, read fresh per request so changes apply at once. */
export interface AuthSettings {
  disable_signup: boolean;
  password_min_length: number;
  jwt_exp: number;
  mailer_autoconfirm: boolean;
  refresh_token_rotation_enabled: boolean;
  security_refresh_token_reuse_interval: number;
  rate_limit_token_refresh: number;
  rate_limit_anonymous_users: number;
  [field: string]: unknown;
}

/** The stored fields of `ref`'s auth config (only those a caller has set). */
export async function storedAuthConfig(platformPool: pg.Pool, ref: string): Promise<Record<string, unknown>> {
  const { rows } = await platformPool.query(
    "select config from platform.auth_config where project_ref = $1",
    [ref],
  );
  return rows[0]?.config ?? {};
}

/** The effective auth config of `ref`: stored fields over the defaults, secrets opened. */
export async function authSettings(platformPool: pg.Pool, ref: string): Promise<AuthSettings> {
  const stored = await storedAuthConfig(platformPool, ref);
  for (const [field, value] of Object.entries(stored)) {
    if (isSecretAuthField(field) && typeof value === "string" && isSealed(value)) {
      stored[field] = kekOf(platformPool).open(value, authFieldPurpose(field));
    }
  }
  return { ...AUTH_CONFIG_DEFAULTS, ...stored } as AuthSettings;
}

/** Merges `changes` into the stored config of `ref` and returns the effective config. */
export async function updateAuthConfig(
  platformPool: pg.Pool,
  ref: string,
  changes: Record<string, unknown>,
): Promise<AuthSettings> {
  // The SMTP password and other secrets are stored sealed with the key-encryption key.
  const sealed = Object.fromEntries(
    Object.entries(changes).map(([field, value]) => [
      field,
      isSecretAuthField(field) && typeof value === "string" && value !== ""
        ? kekOf(platformPool).seal(value, authFieldPurpose(field))
        : value,
    ]),
  );
  await platformPool.query(
    `insert into platform.auth_config (project_ref, config) values ($1, $2)
     on conflict (project_ref) do update
       set config = platform.auth_config.config || excluded.config, updated_at = now()`,
    [ref, JSON.stringify(sealed)],
  );
  return authSettings(platformPool, ref);
}
