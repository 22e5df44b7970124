-- Host names that reach a project besides <ref>.<STRATA_DOMAIN>: its custom hostname (served once its DNS
-- records are verified and it is activated) and its vanity subdomain. A name belongs to one project.
create table if not exists platform.project_hostnames (
  hostname text primary key check (hostname = lower(hostname)),
  project_ref text not null references platform.projects (ref) on delete cascade,
  kind text not null check (kind in ('custom', 'vanity')),
  -- custom: 2_initiated -> 4_origin_setup_completed (DNS verified) -> 5_services_reconfigured (served)
  status text not null,
  verification_token text not null default '',
  verification_errors jsonb not null default '[]',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (project_ref, kind)
);

-- Every Strata process serving the APIs keeps the served names in memory: tell them of each change.
create or replace function platform.notify_hostnames_changed() returns trigger
language plpgsql as $$
begin
  perform pg_notify('strata_hostnames_changed', '');
  return null;
end $$;
drop trigger if exists hostnames_changed on platform.project_hostnames;
create trigger hostnames_changed after insert or update or delete on platform.project_hostnames
  for each statement execute function platform.notify_hostnames_changed();
