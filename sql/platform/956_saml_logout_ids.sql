-- A SAML identity provider's LogoutRequest is taken once, as its responses are: its ID is kept with theirs
-- until its validity window ends (src/auth/handlers/samlSlo.ts).
alter table platform.saml_consumed_ids drop constraint if exists saml_consumed_ids_kind_check;
alter table platform.saml_consumed_ids add constraint saml_consumed_ids_kind_check
  check (kind in ('response', 'assertion', 'logout_request'));
