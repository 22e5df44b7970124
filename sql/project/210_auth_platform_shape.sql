-- The auth schema in the platform auth server's shape: the user columns its flows keep (confirmation,
-- recovery, email change, reauthentication tokens and their send times, invites, bans), identities,
-- sessions with their assurance level, MFA factors and challenges, the methods a session was
-- authenticated with, one-time tokens and PKCE flow state. Only the server (as owner) uses them.
do $$ begin
  create type auth.aal_level as enum ('aal1', 'aal2', 'aal3');
exception when duplicate_object then null; end $$;
do $$ begin
  create type auth.factor_type as enum ('totp', 'webauthn', 'phone');
exception when duplicate_object then null; end $$;
do $$ begin
  create type auth.factor_status as enum ('unverified', 'verified');
exception when duplicate_object then null; end $$;
do $$ begin
  create type auth.code_challenge_method as enum ('s256', 'plain');
exception when duplicate_object then null; end $$;
do $$ begin
  create type auth.one_time_token_type as enum (
    'confirmation_token', 'reauthentication_token', 'recovery_token',
    'email_change_token_new', 'email_change_token_current', 'phone_change_token');
exception when duplicate_object then null; end $$;

-- Tokens are stored as hashes (never the code a mail carries).
alter table auth.users
  add column if not exists instance_id uuid,
  add column if not exists confirmation_token text,
  add column if not exists confirmation_sent_at timestamptz,
  add column if not exists recovery_token text,
  add column if not exists recovery_sent_at timestamptz,
  add column if not exists email_change_token_new text,
  add column if not exists email_change text,
  add column if not exists email_change_sent_at timestamptz,
  add column if not exists email_change_token_current text,
  add column if not exists email_change_confirm_status smallint not null default 0,
  add column if not exists reauthentication_token text,
  add column if not exists reauthentication_sent_at timestamptz,
  add column if not exists invited_at timestamptz,
  add column if not exists banned_until timestamptz,
  add column if not exists phone text,
  add column if not exists phone_confirmed_at timestamptz,
  add column if not exists phone_change text,
  add column if not exists phone_change_token text,
  add column if not exists phone_change_sent_at timestamptz,
  add column if not exists is_super_admin boolean,
  add column if not exists is_sso_user boolean not null default false,
  add column if not exists deleted_at timestamptz,
  add column if not exists confirmed_at timestamptz
    generated always as (least(email_confirmed_at, phone_confirmed_at)) stored;

create table if not exists auth.identities (
  provider_id text not null,
  user_id uuid not null references auth.users on delete cascade,
  identity_data jsonb not null,
  provider text not null,
  last_sign_in_at timestamptz,
  created_at timestamptz default now(),
  updated_at timestamptz default now(),
  email text generated always as (lower(identity_data ->> 'email')) stored,
  id uuid primary key default gen_random_uuid(),
  unique (provider_id, provider)
);
create index if not exists identities_user_id_idx on auth.identities (user_id);

insert into auth.identities (provider_id, user_id, identity_data, provider, last_sign_in_at, created_at)
select u.id::text, u.id,
       jsonb_build_object('sub', u.id::text, 'email', u.email, 'email_verified', u.email_confirmed_at is not null,
                          'phone_verified', false),
       'email', u.last_sign_in_at, u.created_at
  from auth.users u
 where u.email is not null
on conflict do nothing;

alter table auth.sessions
  add column if not exists factor_id uuid,
  add column if not exists aal auth.aal_level not null default 'aal1',
  add column if not exists not_after timestamptz,
  add column if not exists refreshed_at timestamp,
  add column if not exists user_agent text,
  add column if not exists ip inet,
  add column if not exists tag text;
create index if not exists sessions_user_id_idx on auth.sessions (user_id);

-- The token a rotated one replaced (its hash), as the platform's token family.
alter table auth.refresh_tokens add column if not exists parent text;

create table if not exists auth.mfa_factors (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users on delete cascade,
  friendly_name text,
  factor_type auth.factor_type not null,
  status auth.factor_status not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  secret text,
  phone text,
  last_challenged_at timestamptz
);
create unique index if not exists mfa_factors_user_friendly_name_unique
  on auth.mfa_factors (friendly_name, user_id) where trim(friendly_name) <> '';
create index if not exists mfa_factors_user_id_idx on auth.mfa_factors (user_id);

create table if not exists auth.mfa_challenges (
  id uuid primary key default gen_random_uuid(),
  factor_id uuid not null references auth.mfa_factors on delete cascade,
  created_at timestamptz not null default now(),
  verified_at timestamptz,
  ip_address inet,
  otp_code text
);

create table if not exists auth.mfa_amr_claims (
  id uuid primary key default gen_random_uuid(),
  session_id uuid not null references auth.sessions on delete cascade,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  authentication_method text not null,
  unique (session_id, authentication_method)
);

create table if not exists auth.one_time_tokens (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users on delete cascade,
  token_type auth.one_time_token_type not null,
  token_hash text not null check (char_length(token_hash) > 0),
  relates_to text not null,
  created_at timestamp not null default now(),
  updated_at timestamp not null default now(),
  unique (user_id, token_type)
);
create index if not exists one_time_tokens_token_hash_idx on auth.one_time_tokens (token_hash);

create table if not exists auth.flow_state (
  id uuid primary key default gen_random_uuid(),
  user_id uuid references auth.users on delete cascade,
  auth_code text not null,
  code_challenge_method auth.code_challenge_method not null,
  code_challenge text not null,
  provider_type text not null,
  provider_access_token text,
  provider_refresh_token text,
  created_at timestamptz default now(),
  updated_at timestamptz default now(),
  authentication_method text not null,
  auth_code_issued_at timestamptz
);
create index if not exists flow_state_auth_code_idx on auth.flow_state (auth_code);

revoke all on auth.identities, auth.mfa_factors, auth.mfa_challenges, auth.mfa_amr_claims,
  auth.one_time_tokens, auth.flow_state from anon, authenticated, service_role;
