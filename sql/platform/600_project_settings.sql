-- Configuration resources of the Management API that Strata keeps as documents: one row per project and
-- kind (realtime, storage, pooler, ssl, network restrictions, ...). Families that act on the real system
-- (postgres config, read-only mode) apply it to the project database as well.
create table if not exists platform.project_settings (
  project_ref text not null references platform.projects (ref) on delete cascade,
  kind text not null,
  value jsonb not null default '{}',
  updated_at timestamptz not null default now(),
  primary key (project_ref, kind)
);

-- Edge functions: stored with their files (Strata does not run them).
create table if not exists platform.edge_functions (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null references platform.projects (ref) on delete cascade,
  slug text not null check (slug ~ '^[A-Za-z0-9_-]+$'),
  name text not null,
  status text not null default 'ACTIVE',
  version integer not null default 1,
  verify_jwt boolean not null default true,
  import_map boolean not null default false,
  entrypoint_path text,
  import_map_path text,
  files jsonb not null default '[]',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (project_ref, slug)
);

-- SQL snippets of users, listed with cursor pagination.
create table if not exists platform.snippets (
  id uuid primary key default gen_random_uuid(),
  owner_id uuid references platform.users on delete cascade,
  project_ref text references platform.projects (ref) on delete cascade,
  name text not null,
  description text,
  visibility text not null default 'user',
  favorite boolean not null default false,
  content jsonb not null default '{}',
  inserted_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
