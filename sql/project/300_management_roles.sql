-- A login role for read-only SQL from the Management API (`read_only: true`, `database/query/read-only`):
-- it reads everything and writes nothing, whatever the statement tries.
do $$
begin
  if not exists (select from pg_roles where rolname = 'strata_readonly') then
    create role strata_readonly login inherit;
  end if;
end
$$;
grant pg_read_all_data to strata_readonly;
alter role strata_readonly set default_transaction_read_only = on;

-- Migrations applied through the Management API, recorded in the project's own database.
create schema if not exists strata_migrations;
revoke all on schema strata_migrations from public;
create table if not exists strata_migrations.schema_migrations (
  version text primary key,
  name text,
  statements text[] not null default '{}',
  rollback text[],
  created_by text,
  idempotency_key text,
  applied boolean not null default true,
  created_at timestamptz not null default now()
);
