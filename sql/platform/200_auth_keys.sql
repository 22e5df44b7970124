-- Auth resources of each project, in the control plane: opaque API keys (publishable/secret), JWT signing
-- keys, third-party auth integrations and the auth config. Secrets are kept only where they must be used.

-- Opaque keys are looked up by the SHA-256 hash of their value; the value itself is kept too, because
-- the spec shows it again with reveal=true (as the JWT secret is kept).
create table if not exists platform.api_keys (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null references platform.projects (ref) on delete cascade,
  type text not null check (type in ('publishable', 'secret')),
  name text not null,
  description text,
  key_hash text not null unique,
  secret text not null,
  secret_jwt_template jsonb,
  inserted_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (project_ref, name)
);

create table if not exists platform.signing_keys (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null references platform.projects (ref) on delete cascade,
  algorithm text not null check (algorithm in ('ES256', 'RS256', 'HS256', 'EdDSA')),
  status text not null check (status in ('in_use', 'standby', 'previously_used', 'revoked')),
  -- The private JWK (or, for HS256, {kty: oct, k}); public_jwk is null for symmetric keys.
  private_jwk jsonb not null,
  public_jwk jsonb,
  is_legacy boolean not null default false,
  revoked_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index if not exists signing_keys_one_in_use on platform.signing_keys (project_ref) where status = 'in_use';

create table if not exists platform.third_party_auth (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null references platform.projects (ref) on delete cascade,
  type text not null,
  oidc_issuer_url text,
  jwks_url text,
  custom_jwks jsonb,
  resolved_jwks jsonb,
  resolved_at timestamptz,
  inserted_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- Only the fields a caller changed are stored; GET merges them over the defaults in the code.
create table if not exists platform.auth_config (
  project_ref text primary key references platform.projects (ref) on delete cascade,
  config jsonb not null default '{}',
  updated_at timestamptz not null default now()
);
