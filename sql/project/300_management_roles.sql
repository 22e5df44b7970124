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
