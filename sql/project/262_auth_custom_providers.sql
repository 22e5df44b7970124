-- Custom OAuth 2.0 / OIDC providers (custom_oauth_enabled), as on the platform: a project's own providers,
-- named `custom:<name>`, signed in with like the built-in ones. Their URLs are reached under Strata's
-- outbound policy (https, public addresses), which the auth server checks when it uses them.
create table if not exists auth.custom_oauth_providers (
  id uuid primary key default gen_random_uuid(),
  provider_type text not null check (provider_type in ('oauth2', 'oidc')),
  identifier text not null unique check (identifier ~ '^[a-z0-9][a-z0-9:-]{0,48}[a-z0-9]$'),
  name text not null check (char_length(name) between 1 and 100),
  client_id text not null check (char_length(client_id) between 1 and 512),
  client_secret text not null,
  acceptable_client_ids text[] not null default '{}',
  scopes text[] not null default '{}',
  pkce_enabled boolean not null default true,
  attribute_mapping jsonb not null default '{}',
  custom_claims_allowlist text[] not null default '{}',
  authorization_params jsonb not null default '{}',
  enabled boolean not null default true,
  email_optional boolean not null default false,
  issuer text check (issuer is null or char_length(issuer) between 1 and 2048),
  discovery_url text check (discovery_url is null or char_length(discovery_url) <= 2048),
  skip_nonce_check boolean not null default false,
  cached_discovery jsonb,
  discovery_cached_at timestamptz,
  authorization_url text check (authorization_url is null or char_length(authorization_url) <= 2048),
  token_url text check (token_url is null or char_length(token_url) <= 2048),
  userinfo_url text check (userinfo_url is null or char_length(userinfo_url) <= 2048),
  jwks_uri text check (jwks_uri is null or char_length(jwks_uri) <= 2048),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint custom_oauth_providers_oidc_requires_issuer check (provider_type <> 'oidc' or issuer is not null),
  constraint custom_oauth_providers_oauth2_requires_endpoints check (
    provider_type <> 'oauth2'
    or (authorization_url is not null and token_url is not null and userinfo_url is not null))
);

do $$ begin
  if exists (select from pg_roles where rolname = 'supabase_auth_admin') then
    grant select, insert, update, delete on auth.custom_oauth_providers to supabase_auth_admin;
  end if;
end $$;
