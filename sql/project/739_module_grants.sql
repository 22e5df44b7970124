-- The project's owner's privileges on the modules (sql/project/700-735), as the platform's postgres has them:
-- cron's schema, functions and tables (pg_cron's own when the real extension is installed: its job table
-- read-only, as the platform grants it), net's, vault's, `extensions` (to use and to create in) and
-- pg_stat_statements. The SQL login gets the two functions that give Strata's sessions the vault key.
-- Called by Strata each time it opens the project (src/projects/clusters.ts), after the owner's role exists.
create or replace function _strata.grant_modules(ref text) returns void
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  owner_role text := 'postgres_' || ref;
  sql_role text := 'strata_sql_' || ref;
  pgss name := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
                 where e.extname = 'pg_stat_statements');
begin
  if ref !~ '^[a-z]{20}$' then
    raise exception 'invalid project ref %', ref;
  end if;
  execute format('grant usage, create on schema extensions to %I', owner_role);

  if to_regnamespace('cron') is not null then
    execute format('grant usage on schema cron to %I with grant option', owner_role);
    execute format('grant execute on function cron.schedule(text, text), cron.schedule(text, text, text),
      cron.unschedule(bigint), cron.unschedule(text), cron.alter_job(bigint, text, text, text, text, boolean),
      cron.schedule_in_database(text, text, text, text, text, boolean) to %I with grant option', owner_role);
    execute format('grant select, insert, update, delete on cron.job_run_details to %I with grant option', owner_role);
    execute format('grant usage, select on all sequences in schema cron to %I with grant option', owner_role);
    if exists (select from pg_extension where extname = 'pg_cron') then
      execute format('grant select on cron.job to %I with grant option', owner_role);
    else
      -- cron's functions write with the caller's rights (710_cron.sql), so the owner writes the job table;
      -- row security and the guard trigger keep each role to its own jobs.
      execute format('grant select, insert, update, delete on cron.job to %I with grant option', owner_role);
    end if;
  end if;

  if to_regnamespace('net') is not null then
    execute format('grant usage on schema net to %I', owner_role);
    execute format('grant execute on all functions in schema net to %I', owner_role);
    execute format('grant select, insert, update, delete on all tables in schema net to %I', owner_role);
    execute format('grant usage, select on all sequences in schema net to %I', owner_role);
  end if;

  if to_regnamespace('vault') is not null then
    execute format('grant usage on schema vault to %I with grant option', owner_role);
    execute format('grant select, delete on vault.secrets, vault.decrypted_secrets to %I with grant option', owner_role);
    execute format('grant execute on function vault.create_secret(text, text, text, uuid),
      vault.update_secret(uuid, text, text, text, uuid), vault._decrypt(text, uuid) to %I with grant option', owner_role);
    execute format('grant execute on function vault._strata_session_open(), vault._strata_session_seal() to %I',
      sql_role);
  end if;

  if pgss is not null and to_regprocedure('_strata.project_statements(boolean)') is not null then
    execute format('grant select on %I.pg_stat_statements to %I', pgss, owner_role);
    execute format('grant execute on function _strata.project_statements(boolean) to %I', owner_role);
  end if;
end
$$;
revoke all on function _strata.grant_modules(text) from public;
