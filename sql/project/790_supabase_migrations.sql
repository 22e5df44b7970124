-- One migration history, the platform's: supabase_migrations.schema_migrations, which the CLI (`supabase db push`,
-- `migration list`, `migration repair`) reads and writes, and which the Management API's database/migrations and
-- branches now read and write too. Earlier versions kept the API's history apart, in Strata's
-- strata_migrations.schema_migrations: that table moves here with its rows. The schema and the table become the
-- project owner's, as they are postgres's on the platform: _strata.ensure_project_roles hands them over when it next
-- opens the project (every schema a superuser made outside Strata's own goes to the owner), and from then on Strata
-- reads and writes them as the owner only. strata_migrations stays, empty: ensure_project_roles still grants on it.
--
-- A project whose owner already ran the CLI against its database has a supabase_migrations.schema_migrations of the
-- owner's: its rows join the moved history (a version both have keeps the API's record), read as plain columns of
-- the exact built-in types only (no cast, view or function of the tenant's runs here), and the owner's table is
-- dropped; anything else of that name (a view, a table something depends on) is renamed
-- schema_migrations_before_<epoch>, unread.
do $$
declare
  cli regclass := to_regclass('supabase_migrations.schema_migrations');
  kind "char";
  columns text;
begin
  if to_regclass('strata_migrations.schema_migrations') is null then
    return;
  end if;
  -- The CLI writes migrations without statements (`migration repair`): the platform's column allows null.
  alter table strata_migrations.schema_migrations alter column statements drop not null;
  if not exists (select from pg_namespace where nspname = 'supabase_migrations') then
    create schema supabase_migrations;
  end if;
  if cli is not null then
    select relkind into kind from pg_class where oid = cli;
    if kind = 'r' and exists (select from pg_attribute where attrelid = cli and attname = 'version' and not attisdropped
                                and atttypid = 'text'::regtype) then
      select string_agg(format('%I', a.attname), ', ') into columns
        from pg_attribute a
        join (values ('version', 'text'::regtype), ('name', 'text'::regtype), ('statements', 'text[]'::regtype),
                     ('rollback', 'text[]'::regtype), ('created_by', 'text'::regtype),
                     ('idempotency_key', 'text'::regtype)) as wanted(name, type)
          on wanted.name = a.attname and wanted.type = a.atttypid
       where a.attrelid = cli and not a.attisdropped;
      execute format('insert into strata_migrations.schema_migrations (%s) select %s from only %s
                      where version is not null on conflict (version) do nothing', columns, columns, cli);
      begin
        execute format('drop table %s', cli);
        cli := null;
      exception when dependent_objects_still_exist then
        null;
      end;
    end if;
    -- Anything else of that name (a view, a table of other types, one something depends on) is kept, renamed.
    if cli is not null then
      execute format('alter %s %s rename to %I',
        case kind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table'
          when 'S' then 'sequence' else 'table' end,
        cli, 'schema_migrations_before_' || extract(epoch from clock_timestamp())::bigint);
    end if;
  end if;
  alter table strata_migrations.schema_migrations set schema supabase_migrations;
end
$$;
