-- Base backups of a cluster Strata runs (its WAL is archived beside them): what point-in-time restores
-- replay WAL from. They share the logical backups' id sequence, so one project's backup list has unique ids.
create table if not exists platform.physical_backups (
  id bigint primary key default nextval('platform.database_backups_id_seq'),
  cluster_id text not null references platform.clusters (id) on delete cascade,
  kind text not null check (kind in ('manual', 'scheduled')),
  status text not null default 'RUNNING' check (status in ('RUNNING', 'COMPLETED', 'FAILED')),
  -- A directory under STRATA_DATA_DIR/base-backups.
  location text not null,
  size_bytes bigint,
  start_lsn pg_lsn,
  stop_lsn pg_lsn,
  -- First WAL segment a restore from this backup needs from the archive.
  start_wal_file text,
  error text,
  -- The daily slot a scheduled base backup was taken for: one per cluster and slot.
  scheduled_for timestamptz,
  inserted_at timestamptz not null default now(),
  -- When pg_backup_stop answered: the earliest time a restore from this backup can reach.
  consistent_at timestamptz,
  unique (cluster_id, scheduled_for)
);

-- How a restore was made: WAL replay from a base backup to the second, or the latest logical backup.
alter table platform.database_restores add column if not exists method text not null default 'logical_backup';
alter table platform.database_restores
  add column if not exists physical_backup_id bigint references platform.physical_backups (id) on delete set null;

-- Streaming physical standbys of a cluster Strata runs, each registered for the project that set it up
-- (the standby holds the whole cluster). Its REST reads go to it while it is ACTIVE_HEALTHY.
create table if not exists platform.read_replicas (
  id bigserial primary key,
  identifier text not null unique,
  project_ref text not null references platform.projects (ref) on delete cascade,
  cluster_id text not null references platform.clusters (id) on delete cascade,
  region text not null,
  status text not null default 'COMING_UP'
    check (status in ('COMING_UP', 'ACTIVE_HEALTHY', 'UNHEALTHY', 'INIT_FAILED', 'GOING_DOWN')),
  port integer not null,
  -- A directory under STRATA_DATA_DIR/replicas; its physical replication slot and login role on the primary.
  location text not null,
  slot_name text not null,
  role_name text not null,
  error text,
  inserted_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
