-- Email/password users of the project's auth endpoints (/auth/v1), with their sessions and refresh tokens.
-- Only the server (as the database owner) reads and writes these tables; the API roles get nothing.
create table if not exists auth.users (
  id uuid primary key default gen_random_uuid(),
  aud text not null default 'authenticated',
  role text not null default 'authenticated',
  email text unique,
  -- null for anonymous users, who have neither email nor password
  encrypted_password text,
  is_anonymous boolean not null default false,
  email_confirmed_at timestamptz,
  last_sign_in_at timestamptz,
  raw_app_meta_data jsonb not null default '{"provider": "email", "providers": ["email"]}',
  raw_user_meta_data jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table if not exists auth.sessions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users on delete cascade,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- Only a SHA-256 hash of each refresh token is kept. A rotated token keeps its row (revoked = true) so that
-- its reuse can be recognised.
create table if not exists auth.refresh_tokens (
  id bigserial primary key,
  token_hash text not null unique,
  session_id uuid not null references auth.sessions on delete cascade,
  user_id uuid not null references auth.users on delete cascade,
  revoked boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

revoke all on auth.users, auth.sessions, auth.refresh_tokens from anon, authenticated, service_role;
