-- Logical backups of project databases (written by Strata, see src/management/backups/dump.ts) and the
-- restores made from them. A backup's bytes live in the backup store under `location`.
create table if not exists platform.database_backups (
  id bigserial primary key,
  project_ref text not null references platform.projects (ref) on delete cascade,
  kind text not null check (kind in ('manual', 'scheduled', 'pre_restore')),
  status text not null default 'RUNNING' check (status in ('RUNNING', 'COMPLETED', 'FAILED')),
  progress integer not null default 0,
  location text not null,
  size_bytes bigint,
  error text,
  -- The schedule slot a scheduled backup was taken for: one per project and slot, whichever node claims it.
  scheduled_for timestamptz,
  -- When the backup's snapshot was taken: the project is restored as it was then.
  taken_at timestamptz,
  inserted_at timestamptz not null default now(),
  completed_at timestamptz,
  unique (project_ref, scheduled_for)
);
create index if not exists database_backups_project on platform.database_backups (project_ref, taken_at);

create table if not exists platform.database_restores (
  id bigserial primary key,
  project_ref text not null references platform.projects (ref) on delete cascade,
  backup_id bigint references platform.database_backups (id) on delete set null,
  recovery_time_target timestamptz not null,
  status text not null default 'RUNNING' check (status in ('RUNNING', 'COMPLETED', 'FAILED')),
  progress integer not null default 0,
  error text,
  started_at timestamptz not null default now(),
  finished_at timestamptz
);
create unique index if not exists database_restores_one_running on platform.database_restores (project_ref)
  where status = 'RUNNING';
