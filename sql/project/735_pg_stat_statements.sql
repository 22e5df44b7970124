-- pg_stat_statements in `extensions`, as on the platform (the cluster must preload it: the embedded clusters
-- do; a DATABASE_URL cluster needs shared_preload_libraries = 'pg_stat_statements'). Its statistics are the
-- whole cluster's, and the API roles are shared by every project of the cluster: the extension's own view would
-- show this project the statements other projects' anon and authenticated ran, and a superuser's utility
-- statements as written. So extensions.pg_stat_statements reads through _strata.project_statements, which keeps
-- this database's statements of roles that are no superuser; the extension's function and view are the
-- owner's only (_strata.grant_modules), and resetting the statistics stays the installation's.
do $$
declare
  pgss name;
begin
  if not exists (select from pg_available_extensions where name = 'pg_stat_statements') then
    return;
  end if;
  create extension if not exists pg_stat_statements with schema extensions;
  pgss := (select n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
            where e.extname = 'pg_stat_statements');

  execute format('create table if not exists _strata.pg_stat_statements_row (like %I.pg_stat_statements)', pgss);
  execute format($f$
    create or replace function _strata.project_statements(showtext boolean)
    returns setof _strata.pg_stat_statements_row
    language sql stable security definer set search_path = pg_catalog, pg_temp
    begin atomic
      select s.* from %1$I.pg_stat_statements(showtext) s
       where s.dbid = (select d.oid from pg_database d where d.datname = current_database())
         and not exists (select from pg_roles r where r.oid = s.userid and r.rolsuper);
    end$f$, pgss);
  execute format('revoke all on function %I.pg_stat_statements(boolean) from public', pgss);
  execute format('grant execute on function %I.pg_stat_statements(boolean) to strata_stats', pgss);
  grant pg_read_all_stats to strata_stats;
  alter function _strata.project_statements(boolean) owner to strata_stats;
  revoke all on function _strata.project_statements(boolean) from public;

  execute format('create or replace view %1$I.pg_stat_statements as select * from _strata.project_statements(true)', pgss);
  execute format('revoke all on %I.pg_stat_statements from public', pgss);
end
$$;
