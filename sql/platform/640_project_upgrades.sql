-- Clusters Strata runs itself beside the main embedded one (major-version upgrades move projects there):
-- the major version of the binaries that run it. Null for the main cluster and for DATABASE_URL clusters.
alter table platform.clusters add column if not exists embedded_major integer;

-- Major-version upgrades of projects (POST /v1/projects/{ref}/upgrade): status 0 upgrading, 1 upgraded,
-- 2 failed (the project stays on its old cluster); progress and error use the platform's step names.
create table if not exists platform.project_upgrades (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null references platform.projects (ref) on delete cascade,
  source_cluster_id text not null,
  target_cluster_id text,
  target_version integer not null,
  progress text not null default '0_requested',
  status integer not null default 0,
  error text,
  error_detail text,
  initiated_at timestamptz not null default now(),
  latest_status_at timestamptz not null default now()
);
create unique index if not exists project_upgrades_one_running on platform.project_upgrades (project_ref)
  where status = 0;
