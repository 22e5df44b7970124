-- Requests served by each project's data interfaces, counted per minute (Management API usage analytics).
create table if not exists platform.api_usage (
  project_ref text not null references platform.projects (ref) on delete cascade,
  minute timestamptz not null,
  service text not null check (service in ('rest', 'auth', 'realtime', 'storage')),
  requests bigint not null default 0,
  primary key (project_ref, minute, service)
);
