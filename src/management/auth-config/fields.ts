/** The auth config fields of the spec, by type (PATCH body); the GET response adds GET_ONLY_FIELDS. */

/**
 * The identity-provider slots of the spec (`external_<slot>_*`): each has enabled, client_id and secret,
 * and email_optional but workos; four take a base URL, two more client ids, one skips the nonce check.
 */
export const PROVIDER_SLOTS = [
  "apple",
  "azure",
  "bitbucket",
  "discord",
  "facebook",
  "figma",
  "github",
  "gitlab",
  "google",
  "kakao",
  "keycloak",
  "linkedin_oidc",
  "slack_oidc",
  "notion",
  "slack",
  "spotify",
  "twitch",
  "twitter",
  "x",
  "workos",
  "zoom",
] as const;
const URL_SLOTS = ["azure", "gitlab", "keycloak", "workos"];
const ADDITIONAL_CLIENT_ID_SLOTS = ["apple", "google"];
const SKIP_NONCE_CHECK_SLOTS = ["google"];

const providerFields = (kind: "string" | "boolean") =>
  PROVIDER_SLOTS.flatMap((slot) => {
    const field = (name: string) => `external_${slot}_${name}`;
    return kind === "string"
      ? [
          field("client_id"),
          field("secret"),
          ...(URL_SLOTS.includes(slot) ? [field("url")] : []),
          ...(ADDITIONAL_CLIENT_ID_SLOTS.includes(slot) ? [field("additional_client_ids")] : []),
        ]
      : [
          field("enabled"),
          ...(slot === "workos" ? [] : [field("email_optional")]),
          ...(SKIP_NONCE_CHECK_SLOTS.includes(slot) ? [field("skip_nonce_check")] : []),
        ];
  });

/** The provider slots' base URL fields: checked as http(s) URLs. */
export const PROVIDER_URL_FIELDS = URL_SLOTS.map((slot) => `external_${slot}_url`);

export const STRING_FIELDS = [
  "site_url",
  "uri_allow_list",
  "smtp_admin_email",
  "smtp_host",
  "smtp_port",
  "smtp_user",
  "smtp_pass",
  "smtp_sender_name",
  "mailer_subjects_confirmation",
  "mailer_templates_confirmation_content",
  "mailer_subjects_email_change",
  "mailer_templates_email_change_content",
  "mailer_subjects_invite",
  "mailer_templates_invite_content",
  "mailer_subjects_magic_link",
  "mailer_templates_magic_link_content",
  "mailer_subjects_reauthentication",
  "mailer_templates_reauthentication_content",
  "mailer_subjects_recovery",
  "mailer_templates_recovery_content",
  "mailer_subjects_password_changed_notification",
  "mailer_templates_password_changed_notification_content",
  "mailer_subjects_email_changed_notification",
  "mailer_templates_email_changed_notification_content",
  "mailer_subjects_phone_changed_notification",
  "mailer_templates_phone_changed_notification_content",
  "mailer_subjects_mfa_factor_enrolled_notification",
  "mailer_templates_mfa_factor_enrolled_notification_content",
  "mailer_subjects_mfa_factor_unenrolled_notification",
  "mailer_templates_mfa_factor_unenrolled_notification_content",
  "mailer_subjects_identity_linked_notification",
  "mailer_templates_identity_linked_notification_content",
  "mailer_subjects_identity_unlinked_notification",
  "mailer_templates_identity_unlinked_notification_content",
  "mfa_phone_template",
  "webauthn_rp_display_name",
  "webauthn_rp_id",
  "webauthn_rp_origins",
  "hook_custom_access_token_uri",
  "hook_custom_access_token_secrets",
  "hook_mfa_verification_attempt_uri",
  "hook_mfa_verification_attempt_secrets",
  "hook_password_verification_attempt_uri",
  "hook_password_verification_attempt_secrets",
  "hook_send_sms_uri",
  "hook_send_sms_secrets",
  "hook_send_email_uri",
  "hook_send_email_secrets",
  "hook_before_user_created_uri",
  "hook_before_user_created_secrets",
  "hook_after_user_created_uri",
  "hook_after_user_created_secrets",
  "password_required_characters",
  "saml_external_url",
  "security_captcha_secret",
  "sessions_tags",
  "sms_template",
  "sms_test_otp",
  "sms_test_otp_valid_until",
  "sms_twilio_account_sid",
  "sms_twilio_auth_token",
  "sms_twilio_message_service_sid",
  "sms_twilio_content_sid",
  "sms_twilio_verify_account_sid",
  "sms_twilio_verify_auth_token",
  "sms_twilio_verify_message_service_sid",
  "sms_messagebird_access_key",
  "sms_messagebird_originator",
  "sms_textlocal_api_key",
  "sms_textlocal_sender",
  "sms_vonage_api_key",
  "sms_vonage_api_secret",
  "sms_vonage_from",
  "oauth_server_authorization_path",
  ...providerFields("string"),
];

export const BOOLEAN_FIELDS = [
  "disable_signup",
  "external_anonymous_users_enabled",
  "external_email_enabled",
  "external_phone_enabled",
  "mailer_allow_unverified_email_sign_ins",
  "mailer_autoconfirm",
  "mailer_secure_email_change_enabled",
  "mailer_notifications_password_changed_enabled",
  "mailer_notifications_email_changed_enabled",
  "mailer_notifications_phone_changed_enabled",
  "mailer_notifications_mfa_factor_enrolled_enabled",
  "mailer_notifications_mfa_factor_unenrolled_enabled",
  "mailer_notifications_identity_linked_enabled",
  "mailer_notifications_identity_unlinked_enabled",
  "mfa_totp_enroll_enabled",
  "mfa_totp_verify_enabled",
  "mfa_phone_enroll_enabled",
  "mfa_phone_verify_enabled",
  "mfa_web_authn_enroll_enabled",
  "mfa_web_authn_verify_enabled",
  "passkey_enabled",
  "hook_custom_access_token_enabled",
  "hook_mfa_verification_attempt_enabled",
  "hook_password_verification_attempt_enabled",
  "hook_send_sms_enabled",
  "hook_send_email_enabled",
  "hook_before_user_created_enabled",
  "hook_after_user_created_enabled",
  "password_hibp_enabled",
  "refresh_token_rotation_enabled",
  "saml_enabled",
  "security_sb_forwarded_for_enabled",
  "security_captcha_enabled",
  "security_manual_linking_enabled",
  "security_update_password_require_reauthentication",
  "sessions_single_per_user",
  "sms_autoconfirm",
  "oauth_server_enabled",
  "oauth_server_allow_dynamic_registration",
  "custom_oauth_enabled",
  ...providerFields("boolean"),
];

export const INTEGER_FIELDS = [
  "jwt_exp",
  "api_max_request_duration",
  "db_max_pool_size",
  "smtp_max_frequency",
  "mailer_otp_exp",
  "mailer_otp_length",
  "mfa_max_enrolled_factors",
  "mfa_phone_otp_length",
  "mfa_phone_max_frequency",
  "password_min_length",
  "rate_limit_anonymous_users",
  "rate_limit_email_sent",
  "rate_limit_sms_sent",
  "rate_limit_token_refresh",
  "rate_limit_verify",
  "rate_limit_otp",
  "rate_limit_web3",
  "security_refresh_token_reuse_interval",
  "sms_max_frequency",
  "sms_otp_exp",
  "sms_otp_length",
] as const;

export const NUMBER_FIELDS = ["sessions_timebox", "sessions_inactivity_timeout"] as const;

/** Present in GET answers only: never accepted by PATCH. */
export const GET_ONLY_FIELDS = {
  saml_allow_encrypted_assertions: "boolean",
  custom_oauth_max_providers: "integer",
} as const;

export const ENUM_FIELDS = {
  db_max_pool_size_unit: ["connections"],
  sms_provider: ["twilio", "twilio_verify", "messagebird", "textlocal", "vonage"],
  security_captcha_provider: ["hcaptcha", "turnstile"],
} as const;

/**
 * The platform's sign-in providers Strata does not provide (web3 wallets). Their switch
 * `external_<provider>_enabled` is answered false and accepted as false or null, which changes nothing (the CLI's
 * `config push` sends the switch of every provider its config.toml names); switching one on is refused.
 */
export const UNPROVIDED_PROVIDERS = ["web3_solana", "web3_ethereum"] as const;

export const UNPROVIDED_SWITCHES: readonly string[] = UNPROVIDED_PROVIDERS.map(
  (p) => `external_${p}_enabled`,
);

/**
 * Fields of the platform's auth config that Strata has no setting for, answered null as the platform answers an
 * unset one (its clients require every field in the answer).
 */
export const UNSET_FIELDS: readonly string[] = [
  "nimbus_oauth_client_id",
  "nimbus_oauth_client_secret",
  "nimbus_oauth_email_optional",
];
