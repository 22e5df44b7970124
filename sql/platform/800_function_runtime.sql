-- Edge function runtime: what deployed functions print and one row per invocation, read by the
-- Management API's analytics endpoints.
create table if not exists platform.function_logs (
  id bigserial primary key,
  project_ref text not null references platform.projects (ref) on delete cascade,
  function_id uuid,
  slug text not null,
  version integer not null,
  -- 'console' (a line the function printed) or 'invocation' (one request: status and duration).
  kind text not null check (kind in ('console', 'invocation')),
  level text,
  message text,
  method text,
  path text,
  status integer,
  duration_ms integer,
  created_at timestamptz not null default now()
);

create index if not exists function_logs_project_time on platform.function_logs (project_ref, created_at);
