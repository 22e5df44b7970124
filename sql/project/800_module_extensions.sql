-- The extensions of the database modules as the clusters Strata runs provide them (src/db/installation.ts):
-- `create extension pg_cron` (pg_net, pgmq, supabase_vault) sent to PostgreSQL itself records a marker that
-- owns nothing, since the module is Strata's and exists already. A real extension (a DATABASE_URL cluster that
-- has pg_cron) owns its tables: that, not the extension's name in pg_extension, says which one serves.
create or replace function _strata.extension_owns(extension_name text, table_name text) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
  select exists (
    select from pg_depend d join pg_extension e on e.oid = d.refobjid
     where e.extname = extension_name and d.refclassid = 'pg_extension'::regclass
       and d.classid = 'pg_class'::regclass and d.objid = to_regclass(table_name) and d.deptype = 'e')
$$;
revoke all on function _strata.extension_owns(text, text) from public;

-- 760's grant_modules, with the real pg_cron told apart from Strata's marker by what it owns.
create or replace function _strata.grant_modules(ref text) returns void
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  owner_role text := 'postgres_' || ref;
  sql_role text := 'strata_sql_' || ref;
  pgss name := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
                 where e.extname = 'pg_stat_statements');
  real_cron boolean := _strata.extension_owns('pg_cron', 'cron.job');
begin
  if ref !~ '^[a-z]{20}$' then
    raise exception 'invalid project ref %', ref;
  end if;
  execute format('grant usage, create on schema extensions to %I', owner_role);

  if to_regnamespace('cron') is not null then
    execute format('grant usage on schema cron to %I with grant option', owner_role);
    if real_cron then
      -- The extension's own signatures (pg_cron 1.4 names its jobs with type name), as the platform grants them.
      execute format('grant execute on all functions in schema cron to %I with grant option', owner_role);
    else
      execute format('grant execute on function cron.schedule(text, text), cron.schedule(text, text, text),
        cron.unschedule(bigint), cron.unschedule(text), cron.alter_job(bigint, text, text, text, text, boolean),
        cron.schedule_in_database(text, text, text, text, text, boolean) to %I with grant option', owner_role);
    end if;
    execute format('grant select, insert, update, delete on cron.job_run_details to %I with grant option', owner_role);
    execute format('grant usage, select on all sequences in schema cron to %I with grant option', owner_role);
    if real_cron then
      execute format('grant select on cron.job to %I with grant option', owner_role);
    else
      -- cron's functions write with the caller's rights (710_cron.sql), so the owner writes the job table;
      -- row security and the guard trigger keep each role to its own jobs.
      execute format('grant select, insert, update, delete on cron.job to %I with grant option', owner_role);
      execute format('grant select on cron._job_state to %I with grant option', owner_role);
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
    -- Strata's sessions of the owner get the vault key: those of its SQL login, and the owner's own through the
    -- database listener (src/pooler/vaultSession.ts).
    execute format('grant execute on function vault._strata_session_open(), vault._strata_session_seal() to %I, %I',
      sql_role, owner_role);
  end if;

  if pgss is not null and to_regprocedure('_strata.project_statements(boolean)') is not null then
    execute format('grant select on %I.pg_stat_statements to %I', pgss, owner_role);
    execute format('grant execute on function _strata.project_statements(boolean) to %I', owner_role);
  end if;
end
$$;
revoke all on function _strata.grant_modules(text) from public;

-- Strata's pgmq (740) keeps a dropped queue's archive: only an archive the real extension owns is detached
-- from it first (740 asked whether an extension named pgmq exists, which Strata's marker is).
do $outer$
begin
  if to_regclass('pgmq._partitions') is null then
    return;
  end if;
  create or replace function pgmq.detach_archive(queue_name text) returns void
  language plpgsql as $$
  declare
    atable text := pgmq.format_table_name(queue_name, 'a');
  begin
    if pgmq._belongs_to_pgmq(atable) then
      execute pg_catalog.format('alter extension pgmq drop table pgmq.%I', atable);
    end if;
  end
  $$;
end
$outer$;
