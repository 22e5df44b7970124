-- The REST layer's configuration per project (Management API `restapi`/`postgrest`), read by /rest/v1 and
-- /graphql/v1. A project without a row uses the defaults below.
create table if not exists platform.restapi_config (
  project_ref text primary key references platform.projects (ref) on delete cascade,
  db_schema text not null default 'public',
  db_extra_search_path text not null default 'public, extensions',
  max_rows integer not null default 1000 check (max_rows > 0),
  db_pool integer check (db_pool is null or db_pool > 0),
  updated_at timestamptz not null default now()
);
