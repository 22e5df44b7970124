-- The installation's users sign in with their email and a password (a bcrypt hash; never the password), get
-- sessions (opaque tokens kept as SHA-256 hashes, expiring, ended by sign-out) and join organizations by
-- invitation (the token mailed kept as a hash; one acceptance before it expires). The bootstrap admin has no
-- password until the operator sets one (`npm run strata -- user password`).
alter table platform.users add column if not exists password_hash text;
alter table platform.users add column if not exists email_verified boolean not null default false;

create table if not exists platform.user_sessions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references platform.users on delete cascade,
  token_hash text not null unique,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  last_used_at timestamptz
);
create index if not exists user_sessions_user on platform.user_sessions (user_id);

create table if not exists platform.organization_invitations (
  id uuid primary key default gen_random_uuid(),
  organization_id uuid not null references platform.organizations on delete cascade,
  email text not null check (email = lower(email)),
  role_name text not null check (role_name in ('Owner', 'Administrator', 'Developer', 'Read-only')),
  token_hash text not null unique,
  -- Whether the link went by mail (else it was answered to the inviter): only a mailed one proves the email.
  mailed boolean not null,
  invited_by uuid references platform.users on delete set null,
  invited_at timestamptz not null default now(),
  expires_at timestamptz not null,
  unique (organization_id, email)
);
