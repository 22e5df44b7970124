-- The DDL watch ignores what only touches temporary objects (a function that builds a temp table on every
-- call): those change nothing the data APIs expose, and each notice rebuilds the project's schema caches.
create or replace function _strata.notify_ddl() returns event_trigger
language plpgsql
as $$
begin
  if tg_event = 'sql_drop' then
    if not exists (select from pg_event_trigger_dropped_objects() where not is_temporary) then
      return;
    end if;
  elsif tg_event = 'ddl_command_end' then
    if not exists (select from pg_event_trigger_ddl_commands()
                   where schema_name is null
                      or (schema_name <> 'pg_temp' and schema_name not like 'pg\_temp\_%')) then
      return;
    end if;
  end if;
  perform pg_notify('strata_ddl', tg_tag);
end
$$;
