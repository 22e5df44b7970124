-- Just-in-time database access: which organization members may take which database roles of a project,
-- until when and from where. A request (POST .../database/jit) makes a login role that Postgres itself
-- stops accepting at expires_at (VALID UNTIL).
create table if not exists platform.jit_grants (
  project_ref text not null references platform.projects (ref) on delete cascade,
  user_id uuid not null references platform.users on delete cascade,
  role text not null,
  expires_at timestamptz,
  allowed_cidrs text[] not null default '{}',
  allowed_cidrs_v6 text[] not null default '{}',
  branches_only boolean not null default false,
  primary key (project_ref, user_id, role)
);

-- Invitations by email: the token is kept as its SHA-256 only.
create table if not exists platform.jit_invites (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null references platform.projects (ref) on delete cascade,
  email text not null,
  token_hash text not null,
  roles jsonb not null,
  created_at timestamptz not null default now()
);
create index if not exists jit_invites_project on platform.jit_invites (project_ref);
