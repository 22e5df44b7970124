-- The DDL watch ignores the GRANT and REVOKE of vault's session functions (730_vault.sql's
-- _strata_session_open and _strata_session_seal, which run as strata_vault) on the session's temporary key table:
-- a GRANT's command names no schema, so 013's filter took it for a change of the exposed schema, and every
-- session given the vault key (each new data-pool connection, each cron run, each SQL-endpoint query) rebuilt the
-- project's schema caches and replaced its data pool. strata_vault runs only vault's functions and grants
-- nothing else. 013's notify_ddl otherwise, with 611's pinned search_path.
create or replace function _strata.notify_ddl() returns event_trigger
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
  if tg_event = 'sql_drop' then
    if not exists (select from pg_event_trigger_dropped_objects() where not is_temporary) then
      return;
    end if;
  elsif tg_event = 'ddl_command_end' then
    if tg_tag in ('GRANT', 'REVOKE') and current_user = 'strata_vault' then
      return;
    end if;
    if not exists (select from pg_event_trigger_ddl_commands()
                   where schema_name is null
                      or (schema_name <> 'pg_temp' and schema_name not like 'pg\_temp\_%')) then
      return;
    end if;
  end if;
  perform pg_notify('strata_ddl', tg_tag);
end
$$;
