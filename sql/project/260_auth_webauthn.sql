-- WebAuthn MFA factors, as on the platform: a factor keeps its credential (public key, sign counter,
-- transports, flags) and its authenticator's AAGUID; a challenge keeps the ceremony's session data (the
-- random challenge the authenticator signs); the factor keeps its last ceremony for the project to inspect.
alter table auth.mfa_factors add column if not exists web_authn_credential jsonb;
alter table auth.mfa_factors add column if not exists web_authn_aaguid uuid;
alter table auth.mfa_factors add column if not exists last_webauthn_challenge_data jsonb;
alter table auth.mfa_challenges add column if not exists web_authn_session_data jsonb;
