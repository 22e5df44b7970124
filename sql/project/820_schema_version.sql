-- The schema version: a number that grows in the transaction of every change the DDL watch notices, so that a
-- node serving data requests knows in each request's own round trip whether the schema it planned against is
-- still the database's (src/projects/runtime.ts). The watch's notice arrives after the commit, on its own
-- connection, possibly after the next request (sent through another node) was answered: the version is
-- read-your-writes across nodes, the notice only gets the rebuild going early.
--
-- One row per backend that changed the schema, the version being their sum: a transaction only ever writes its own
-- backend's row, so concurrent DDL transactions never wait on each other for it (one shared counter row would
-- serialise them and turn their lock waits into deadlocks). A backend's first change folds the rows of ended
-- backends into its own (the sum is unchanged), so the table stays as small as the number of live backends that
-- changed the schema. In `extensions` with Strata's other tables (791), no privilege but the superuser's.
-- The owner may create in `extensions` (739): what it made under the names used here first goes, as in 791.
do $$
declare
  taken record;
begin
  for taken in
    select c.relkind, c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'extensions' and c.relname in ('strata_schema_changes', 'strata_schema_changes_pkey')
       and not (select rolsuper from pg_roles where oid = c.relowner)
  loop
    execute format('drop %s if exists extensions.%I cascade',
      case taken.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'S' then 'sequence'
        when 'i' then 'index' when 'I' then 'index' when 'f' then 'foreign table' when 'c' then 'type'
        else 'table' end, taken.relname);
  end loop;
  for taken in
    select t.oid::regtype as type from pg_type t join pg_namespace n on n.oid = t.typnamespace
     where n.nspname = 'extensions' and t.typname = 'strata_schema_changes' and t.typrelid = 0
       and not (select rolsuper from pg_roles where oid = t.typowner)
  loop
    execute format('drop type %s cascade', taken.type);
  end loop;
end
$$;

create table if not exists extensions.strata_schema_changes (
  backend int primary key,
  changes bigint not null
);
revoke all on extensions.strata_schema_changes from public;

-- 766's notify_ddl (filters and notice unchanged), which also marks the transaction's command as a schema change
-- for the counting trigger below: the filter reads current_user, which a security definer function cannot.
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
  perform set_config('strata.schema_changed', 'on', true);
  perform pg_notify('strata_ddl', tg_tag);
end
$$;

-- Counts a command notify_ddl marked. Fires after it (event triggers of one event fire in name order, and a
-- drop's sql_drop fires before its ddl_command_end). Security definer: the row is written whoever ran the DDL.
-- A session that sets the mark itself only counts a command it ran anyway, forcing its own project's rebuild.
create or replace function _strata.count_schema_change() returns event_trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
  first_change boolean;
begin
  if current_setting('strata.schema_changed', true) is distinct from 'on' then
    return;
  end if;
  perform set_config('strata.schema_changed', '', true);
  insert into extensions.strata_schema_changes as c values (pg_backend_pid(), 1)
    on conflict (backend) do update set changes = c.changes + 1
    returning c.xmax = 0 into first_change;
  if first_change then
    with ended as (
      delete from extensions.strata_schema_changes
       where backend in (select s.backend from extensions.strata_schema_changes s
                          where s.backend <> pg_backend_pid()
                            and not exists (select from pg_stat_activity a where a.pid = s.backend)
                            for update skip locked)
      returning changes)
    update extensions.strata_schema_changes
       set changes = changes + (select coalesce(sum(changes), 0) from ended)
     where backend = pg_backend_pid();
  end if;
end
$$;
revoke all on function _strata.count_schema_change() from public;

drop event trigger if exists strata_watch_version;
create event trigger strata_watch_version on ddl_command_end execute function _strata.count_schema_change();

-- The data login reads the table: ahead of every data request's statement, in the same round trip
-- (src/db/pipeline.ts), and after a change before the schema caches are derived again. The check is a plain
-- statement, not a function, for its cost on every request (a plpgsql call costs about three times as much).
-- 765's ensure_project_authenticator, which also lets the data login read the version (it does not inherit the
-- privileges of the roles it becomes, which may already use `extensions`). Tenant code that reaches the login
-- (`reset role`) reads a count of schema changes.
create or replace function _strata.ensure_project_authenticator(ref text, password text)
returns void language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  login text := 'authenticator_' || ref;
begin
  if ref !~ '^[a-z]{20}$' then
    raise exception 'invalid project ref %', ref;
  end if;
  if not exists (select from pg_roles where rolname = login) then
    execute format('create role %I login noinherit', login);
  end if;
  execute format('alter role %I login noinherit nosuperuser nocreatedb nocreaterole noreplication nobypassrls password %L',
    login, password);
  if not pg_has_role(login, 'authenticator', 'member') then
    execute format('grant authenticator to %I', login);
  end if;
  execute format('grant connect on database %I to %I', current_database(), login);

  -- The shared login no longer opens this project's database (its defaults, read-only mode set by an earlier
  -- version included, act on nothing; read-only mode is applied to the project's own login by its next check).
  execute format('revoke connect on database %I from authenticator', current_database());

  if to_regprocedure('vault._strata_session_open()') is not null then
    execute format('grant usage on schema vault to %I', login);
    execute format('grant execute on function vault._strata_session_open(), vault._strata_session_seal() to %I',
      login);
  end if;

  execute format('grant usage on schema extensions to %I', login);
  execute format('grant select on extensions.strata_schema_changes to %I', login);
end
$$;
revoke all on function _strata.ensure_project_authenticator(text, text) from public;
