-- The DDL watch: every DDL command (create, alter, drop, comment, grant, policy, ...) notifies the server
-- on channel strata_ddl, which rebuilds the project's schema caches.
create or replace function _strata.notify_ddl() returns event_trigger
language plpgsql
as $$
begin
  perform pg_notify('strata_ddl', tg_tag);
end
$$;

drop event trigger if exists strata_watch_ddl;
create event trigger strata_watch_ddl on ddl_command_end execute function _strata.notify_ddl();

drop event trigger if exists strata_watch_drop;
create event trigger strata_watch_drop on sql_drop execute function _strata.notify_ddl();
