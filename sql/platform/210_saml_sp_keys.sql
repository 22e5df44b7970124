-- Each project's SAML service-provider key pair: the key signs the AuthnRequests sent to identity
-- providers, the certificate is published in the SP metadata. Both are stored sealed with the
-- key-encryption key (platform/kek.ts) and made on the project's first SAML use.
create table if not exists platform.saml_sp_keys (
  project_ref text primary key references platform.projects (ref) on delete cascade,
  private_key text not null,
  certificate text not null,
  created_at timestamptz not null default now()
);
