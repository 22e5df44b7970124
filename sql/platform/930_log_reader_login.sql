-- Log queries no longer run on Strata's superuser connection: they log in as strata_log_reader (made in
-- 901_logs.sql), whose password Strata derives from its key-encryption key and sets itself. The role is
-- nothing but a reader of the views of schema `logs`: no superuser or other attribute, no inherited or
-- granted role, read-only and 5 s at most whatever a session asks, and CONNECT on the control database
-- only (granted at every start, beside the revoke from PUBLIC: src/platform/controlDatabase.ts).
alter role strata_log_reader with login noinherit nosuperuser nocreatedb nocreaterole noreplication nobypassrls;
alter role strata_log_reader set default_transaction_read_only = on;
alter role strata_log_reader set statement_timeout = '5s';
alter role strata_log_reader set search_path = logs;

do $$
declare
  granted text;
begin
  for granted in
    select g.rolname from pg_auth_members m
      join pg_roles g on g.oid = m.roleid join pg_roles r on r.oid = m.member
     where r.rolname = 'strata_log_reader'
  loop
    execute format('revoke %I from strata_log_reader', granted);
  end loop;
end $$;

-- It creates nothing anywhere: PostgreSQL 14 still lets PUBLIC create in schema public (TEMP and CREATE on
-- the database went with the revoke from PUBLIC).
revoke create on schema public from public;

-- What PUBLIC may call in this database that reaches beyond the reader's own statement: other sessions'
-- statements and their ends (every log query runs as this one role, so a tenant would see and cancel
-- another's), NOTIFY on the channels Strata's processes listen to, and the advisory locks Strata's own work
-- holds in this database. The reader is the only role besides Strata's superuser that connects here.
do $$
declare
  fn regprocedure;
begin
  for fn in
    select p.oid::regprocedure from pg_proc p
     where p.pronamespace = 'pg_catalog'::regnamespace
       and p.proname in ('set_config', 'pg_notify', 'pg_cancel_backend', 'pg_terminate_backend',
         'pg_stat_get_activity', 'pg_stat_get_backend_activity', 'pg_advisory_lock', 'pg_advisory_lock_shared',
         'pg_try_advisory_lock', 'pg_try_advisory_lock_shared', 'pg_advisory_xact_lock',
         'pg_advisory_xact_lock_shared', 'pg_try_advisory_xact_lock', 'pg_try_advisory_xact_lock_shared')
  loop
    execute format('revoke execute on function %s from public', fn);
  end loop;
end $$;
revoke select on pg_catalog.pg_stat_activity from public;
