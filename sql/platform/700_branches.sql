-- Preview branches: a branch is a project of its own (own ref, database, keys and host) made from a parent
-- project; this row links the two. Operations on a branch (create, push, merge, reset) are action runs with
-- their steps and log.
create table if not exists platform.branches (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null unique references platform.projects (ref) on delete cascade,
  parent_project_ref text not null references platform.projects (ref) on delete cascade,
  name text not null,
  git_branch text,
  pr_number integer,
  persistent boolean not null default false,
  with_data boolean not null default false,
  notify_url text,
  status text not null default 'CREATING_PROJECT',
  review_requested_at timestamptz,
  deletion_scheduled_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (parent_project_ref, name)
);

create table if not exists platform.action_runs (
  id uuid primary key default gen_random_uuid(),
  branch_id uuid not null references platform.branches on delete cascade,
  kind text not null,
  run_steps jsonb not null,
  logs text not null default '',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index if not exists action_runs_branch on platform.action_runs (branch_id, created_at);
