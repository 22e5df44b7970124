-- The OAuth 2.0 authorization server: applications registered under an organization, authorization codes,
-- refresh tokens. Codes, secrets and tokens are kept only as SHA-256 hashes. Access tokens are rows of
-- platform.access_tokens (with the scopes granted, the application, the grant and the organization they act in).
create table if not exists platform.oauth_apps (
  id uuid primary key default gen_random_uuid(),
  organization_id uuid not null references platform.organizations on delete cascade,
  name text not null,
  client_id text not null unique,
  client_secret_hash text not null,
  redirect_uris text[] not null,
  scopes text[] not null,
  created_by uuid references platform.users on delete set null,
  created_at timestamptz not null default now()
);

create table if not exists platform.oauth_codes (
  code_hash text primary key,
  app_id uuid not null references platform.oauth_apps on delete cascade,
  user_id uuid not null references platform.users on delete cascade,
  organization_id uuid not null references platform.organizations on delete cascade,
  scopes text[] not null,
  redirect_uri text,
  code_challenge text,
  code_challenge_method text,
  expires_at timestamptz not null
);

-- One grant (an authorization) holds a chain of refresh tokens, each replaced by the next on use; a
-- revoked one presented again revokes the whole grant.
create table if not exists platform.oauth_refresh_tokens (
  token_hash text primary key,
  grant_id uuid not null,
  app_id uuid not null references platform.oauth_apps on delete cascade,
  user_id uuid not null references platform.users on delete cascade,
  organization_id uuid not null references platform.organizations on delete cascade,
  scopes text[] not null,
  expires_at timestamptz not null,
  revoked_at timestamptz,
  created_at timestamptz not null default now()
);
create index if not exists oauth_refresh_tokens_grant on platform.oauth_refresh_tokens (grant_id);

alter table platform.access_tokens add column if not exists oauth_grant_id uuid;
alter table platform.access_tokens
  add column if not exists organization_id uuid references platform.organizations on delete cascade;
create index if not exists access_tokens_oauth_grant on platform.access_tokens (oauth_grant_id)
  where oauth_grant_id is not null;
