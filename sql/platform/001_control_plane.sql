-- The control plane: every management resource is a row here. The API roles get nothing in this schema.
create schema if not exists platform;
revoke all on schema platform from public;

create extension if not exists pgcrypto;

create table if not exists platform.users (
  id uuid primary key default gen_random_uuid(),
  email text not null unique,
  username text not null,
  created_at timestamptz not null default now()
);

create table if not exists platform.organizations (
  id uuid primary key default gen_random_uuid(),
  slug text not null unique check (slug ~ '^[\w-]+$'),
  name text not null,
  created_at timestamptz not null default now()
);

create table if not exists platform.organization_members (
  organization_id uuid not null references platform.organizations on delete cascade,
  user_id uuid not null references platform.users on delete cascade,
  role_name text not null default 'Owner',
  created_at timestamptz not null default now(),
  primary key (organization_id, user_id)
);

-- Personal access tokens (permissions null: all of the user's privileges) and fine-grained tokens
-- (a list of the spec's permissions). Only a SHA-256 hash of the token is kept.
create table if not exists platform.access_tokens (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references platform.users on delete cascade,
  name text not null,
  token_hash text not null unique,
  token_prefix text not null,
  permissions text[],
  scopes text[],
  created_at timestamptz not null default now(),
  expires_at timestamptz,
  last_used_at timestamptz
);

-- Postgres clusters projects can live on; the main database's cluster is registered at first start.
create table if not exists platform.clusters (
  id text primary key,
  region text not null,
  admin_url text not null,
  authenticator_password text not null,
  created_at timestamptz not null default now()
);

create table if not exists platform.projects (
  id serial primary key,
  ref text not null unique check (ref ~ '^[a-z]{20}$'),
  name text not null,
  organization_id uuid not null references platform.organizations,
  cluster_id text not null references platform.clusters,
  database_name text not null,
  status text not null default 'COMING_UP',
  is_default boolean not null default false,
  jwt_secret text not null,
  -- iat of the legacy anon/service_role keys: they are re-derived from the secret, never stored.
  legacy_keys_iat bigint not null default extract(epoch from now())::bigint,
  legacy_keys_enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index if not exists projects_one_default on platform.projects (is_default) where is_default;
