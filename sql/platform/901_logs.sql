-- The platform's log sources for Strata's own events: every API request of a project (edge_logs), kept
-- for LOG_RETENTION_HOURS and queried through the Management API's `analytics/endpoints/logs`.
create table if not exists platform.log_events (
  id bigserial primary key,
  project_ref text not null references platform.projects (ref) on delete cascade,
  source text not null,
  timestamp timestamptz not null default now(),
  event_message text not null,
  metadata jsonb not null default '{}'
);
create index if not exists log_events_project_time on platform.log_events (project_ref, source, timestamp);

-- Log drains: where a project's new log events are forwarded. `config` is sealed with the installation's
-- key-encryption key (it holds URLs and headers with credentials); `cursor` is the last event forwarded.
create table if not exists platform.log_drains (
  id uuid primary key default gen_random_uuid(),
  project_ref text not null references platform.projects (ref) on delete cascade,
  name text not null,
  description text not null default '',
  backend_type text not null,
  config text not null,
  cursor bigint not null default 0,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- A log query runs as this role (no login: Strata's connection switches to it for one statement), which
-- may read only the views below; they show one project's events in the query's time range.
do $$
begin
  create role strata_log_reader nologin;
exception when duplicate_object or unique_violation then null;
end $$;

create schema if not exists logs;
revoke all on schema logs from public;
grant usage on schema logs to strata_log_reader;

create or replace view logs.edge_logs with (security_barrier) as
  select id, timestamp, event_message, metadata
    from platform.log_events
   where source = 'edge_logs'
     and project_ref = current_setting('strata.log_ref')
     and timestamp >= current_setting('strata.log_start')::timestamptz
     and timestamp < current_setting('strata.log_end')::timestamptz;

create or replace view logs.function_logs with (security_barrier) as
  select id, created_at as timestamp, coalesce(message, method || ' ' || path || ' ' || status) as event_message,
         jsonb_strip_nulls(jsonb_build_object(
           'function_id', function_id, 'slug', slug, 'version', version, 'kind', kind, 'level', level,
           'method', method, 'path', path, 'status', status, 'duration_ms', duration_ms)) as metadata
    from platform.function_logs
   where project_ref = current_setting('strata.log_ref')
     and created_at >= current_setting('strata.log_start')::timestamptz
     and created_at < current_setting('strata.log_end')::timestamptz;

grant select on logs.edge_logs, logs.function_logs to strata_log_reader;

-- The reader's statement could otherwise change its role or the views' scope through set_config; Strata's
-- own (superuser) connection is not bound by this.
revoke execute on function pg_catalog.set_config(text, text, boolean) from public;

-- Drains kept as settings documents before they forwarded anything move to their table (their config is
-- sealed by Strata at its next start).
insert into platform.log_drains (id, project_ref, name, description, backend_type, config)
select (d ->> 'id')::uuid, s.project_ref, d ->> 'name', coalesce(d ->> 'description', ''), d ->> 'backend_type',
       (d -> 'config')::text
  from platform.project_settings s, jsonb_array_elements(s.value -> 'items') d
 where s.kind = 'log_drains'
on conflict (id) do nothing;
delete from platform.project_settings where kind = 'log_drains';
