-- The modules' state (sql/project/710-730) in a project's logical backups and upgrades: the rows of cron.job,
-- cron.job_run_details, net.http_request_queue, net._http_response and vault.secrets are written into the dump
-- (src/jobs/backups/dump.ts) and loaded back by Strata's part of the load (630_owner_loads.sql), as auth's are:
-- the tables are Strata's, the rows the project's. cron._job_state is emptied with cron.job (its foreign key
-- asks for it) and never loaded: the scheduler starts the slot count of the jobs it finds without one. Vault's
-- secrets come back encrypted as they were, for the project's own key (vault._strata_public_key is not
-- loaded: every project keeps its own). A table of the real extension (pg_cron, pg_net) is the extension's.
create or replace function _strata_load.is_module_table(rel regclass) returns boolean
language sql stable set search_path = pg_catalog, pg_temp as $$
  select coalesce(rel = any(array[to_regclass('cron.job'), to_regclass('cron.job_run_details'),
                                  to_regclass('cron._job_state'), to_regclass('net.http_request_queue'),
                                  to_regclass('net._http_response'), to_regclass('vault.secrets')]), false)
     and not exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = rel
                      and d.deptype = 'e')
$$;
revoke all on function _strata_load.is_module_table(regclass) from public;

-- 630's platform_table, which also takes the modules' tables.
create or replace function _strata_load.platform_table(name text) returns regclass
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
  rel regclass := to_regclass(name);
  by_superuser boolean;
begin
  select r.rolsuper into by_superuser
    from pg_class c join pg_namespace n on n.oid = c.relnamespace join pg_roles r on r.oid = c.relowner
   where c.oid = rel and c.relkind = 'r'
     and (_strata_load.is_platform_schema(n.nspname) or _strata_load.is_module_table(rel));
  if by_superuser is null then
    raise exception '% is not a table of the platform''s schemas', name;
  end if;
  if exists (select from pg_trigger t where t.tgrelid = rel and not t.tgisinternal
              and (not by_superuser or t.tgenabled in ('A', 'R'))) then
    raise exception '% has a trigger that would fire during the load', name;
  end if;
  return rel;
end
$$;

-- 630's set_platform_sequence, which also takes the sequences of the modules' tables.
create or replace function _strata_load.set_platform_sequence(key text, seq_name text, seq_value bigint,
  is_called boolean) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
  rel regclass := to_regclass(seq_name);
begin
  perform _strata_load.session_owner(key);
  if not exists (select from pg_class c join pg_namespace n on n.oid = c.relnamespace
                   join pg_roles r on r.oid = c.relowner
                  where c.oid = rel and c.relkind = 'S' and r.rolsuper
                    and (_strata_load.is_platform_schema(n.nspname)
                         or exists (select from pg_depend d
                                     where d.classid = 'pg_class'::regclass and d.objid = rel
                                       and d.refclassid = 'pg_class'::regclass and d.deptype in ('a', 'i')
                                       and _strata_load.is_module_table(d.refobjid::regclass)))) then
    raise exception '% is not a sequence Strata owns', seq_name;
  end if;
  perform setval(rel, seq_value, is_called);
end
$$;

-- 739's grant_modules, with cron's bookkeeping readable by the owner (with grant option, as the rest of
-- cron's tables: the platform's docs grant "all privileges on all tables in schema cron", which needs a grant
-- option on each of them), the real pg_cron's functions whatever their signatures, and vault's session functions
-- for the owner's own sessions too.
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
    if exists (select from pg_extension where extname = 'pg_cron') then
      -- The extension's own signatures (pg_cron 1.4 names its jobs with type name), as the platform grants them.
      execute format('grant execute on all functions in schema cron to %I with grant option', owner_role);
    else
      execute format('grant execute on function cron.schedule(text, text), cron.schedule(text, text, text),
        cron.unschedule(bigint), cron.unschedule(text), cron.alter_job(bigint, text, text, text, text, boolean),
        cron.schedule_in_database(text, text, text, text, text, boolean) to %I with grant option', owner_role);
    end if;
    execute format('grant select, insert, update, delete on cron.job_run_details to %I with grant option', owner_role);
    execute format('grant usage, select on all sequences in schema cron to %I with grant option', owner_role);
    if exists (select from pg_extension where extname = 'pg_cron') then
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
