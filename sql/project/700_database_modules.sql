-- The platform's in-database modules (cron, net, vault, pg_stat_statements in `extensions`), shared parts. The
-- schemas cron, net and vault are Strata's: made and owned by Strata's superuser, never handed to the project's
-- owner (who could otherwise attach triggers to their tables or replace their functions), and not part of the
-- project's backups. The project reaches them through grants, as on the platform. The work behind them is done
-- by roles without powers, cluster-wide and NOLOGIN; nobody logs in as one and no project role is a member:
--   strata_cron   the scheduler's bookkeeping (claims slots, records runs) and the trigger that starts a job's
--                 slot count;
--   strata_net    the HTTP worker: takes requests from net.http_request_queue, records net._http_response;
--   strata_vault  owns vault's functions and view: encrypts with the project's public key, decrypts with the
--                 private key Strata hands to its own sessions only (src/modules/vault.ts);
--   strata_stats  reads the statistics of this database's statements for extensions.pg_stat_statements, as a
--                 member of pg_read_all_stats (its only membership, hence INHERIT).
do $$
declare
  r text;
begin
  foreach r in array array['strata_cron', 'strata_net', 'strata_vault', 'strata_stats'] loop
    begin
      if not exists (select from pg_roles where rolname = r) then
        execute format('create role %I nologin noinherit', r);
      end if;
    exception when duplicate_object or unique_violation then
      null; -- another database's bootstrap made it a moment ago
    end;
    execute format('alter role %I nologin nosuperuser nocreatedb nocreaterole noreplication nobypassrls %s', r,
      case when r = 'strata_stats' then 'inherit' else 'noinherit' end);
  end loop;
end
$$;

-- The list and pinned search_path of 630_owner_loads.sql, with the modules' schemas and `extensions`.
create or replace function _strata.is_internal_schema(name text) returns boolean
language sql immutable set search_path = pg_catalog, pg_temp as $$
  select name like 'pg\_%' or name in ('information_schema', 'platform', '_strata', '_strata_graphql', '_strata_load',
                                        'strata_migrations', 'supabase_functions', 'cron', 'net', 'vault', 'extensions')
$$;

-- `extensions`, as on the platform: where the project's extensions live (the data API's extra search path
-- names it). Strata's schema, so what it installs there stays put; the owner may create in it
-- (_strata.grant_modules), and the API roles may use it.
create schema if not exists extensions;
alter schema extensions owner to current_user;
grant usage on schema extensions to anon, authenticated, service_role;

-- pgcrypto, which the platform has in `extensions` and vault encrypts with. Where the project made it
-- elsewhere before, it stays there.
do $$
begin
  if not exists (select from pg_extension where extname = 'pgcrypto')
     and exists (select from pg_available_extensions where name = 'pgcrypto') then
    create extension pgcrypto with schema extensions;
  end if;
end
$$;
