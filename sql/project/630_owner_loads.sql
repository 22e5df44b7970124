-- Loads that run as the project's owner (a restore, an upgrade's restore, a branch's copy of rows): Strata
-- makes the tenant's objects and writes the tenant's rows on a connection that logs in as the project's SQL
-- role acting as its owner, so the tenant's constraints, defaults, triggers, domains, index expressions and
-- views run with the owner's rights, never a superuser's. The few steps of such a load that need a superuser
-- go through the functions below, in the same transaction: emptying the user's schemas (public belongs to
-- pg_database_owner, and an administrator's objects to a superuser) and writing the rows and sequences of the
-- platform's tables a superuser owns (auth, strata_migrations).
--
-- Each function asks for the key Strata registered for that one session, from a connection of its own
-- (`session_keys` keeps its hash with the session's pid): tenant code running in the session knows neither,
-- so it cannot call them. Every statement here is Strata's, about Strata's objects, with a pinned search_path;
-- none reads a tenant object (rows come through a staging table made here, which the owner may only fill).

-- A schema of this name made by someone else before this file is not Strata's: it goes.
do $$
begin
  if exists (select from pg_namespace n join pg_roles r on r.oid = n.nspowner
             where n.nspname = '_strata_load' and not r.rolsuper) then
    drop schema _strata_load cascade;
  end if;
end
$$;
create schema if not exists _strata_load;
-- Anyone may look the functions up; without the session's key they refuse.
revoke all on schema _strata_load from public;
grant usage on schema _strata_load to public;
alter default privileges in schema _strata_load revoke execute on functions from public;

-- Strata's machinery, as _strata: never dumped, never handed to the owner (010_project_roles.sql). The list and
-- the pinned search_path of 610_webhooks_without_superuser.sql, with _strata_load.
create or replace function _strata.is_internal_schema(name text) returns boolean
language sql immutable set search_path = pg_catalog, pg_temp as $$
  select name like 'pg\_%' or name in ('information_schema', 'platform', '_strata', '_strata_graphql', '_strata_load',
                                        'strata_migrations', 'supabase_functions')
$$;

create table if not exists _strata_load.session_keys (
  key_hash bytea primary key,
  pid integer not null,
  owner_role name not null,
  expires_at timestamptz not null
);
revoke all on table _strata_load.session_keys from public;

-- The owner role of the load session holding `key`; raises in any other session or without the key.
create or replace function _strata_load.session_owner(key text) returns name
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
  owner_role name;
begin
  select s.owner_role into owner_role from _strata_load.session_keys s
   where s.key_hash = sha256(convert_to(key, 'UTF8')) and s.pid = pg_backend_pid()
     and s.expires_at > clock_timestamp();
  if owner_role is null then
    raise exception 'not a Strata load session';
  end if;
  return owner_role;
end
$$;

-- For queries of the owner's session (it has no access to _strata).
create or replace function _strata_load.is_internal_schema(name text) returns boolean
language sql immutable security definer set search_path = pg_catalog, pg_temp as $$
  select _strata.is_internal_schema(name)
$$;

-- Schemas whose tables are the platform's: the same list as MANAGED_SCHEMAS of src/management/backups/dump.ts.
create or replace function _strata_load.is_platform_schema(name text) returns boolean
language sql immutable as $$
  select name in ('auth', 'storage', 'realtime', 'supabase_functions', 'strata_migrations')
$$;

-- A table of the platform's schemas. One a superuser owns may have no trigger that fires while
-- session_replication_role is replica (an administrator's trigger could call tenant code); one the tenant owns
-- (storage, realtime) may have no trigger at all: the load dropped them first.
create or replace function _strata_load.platform_table(name text) returns regclass
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
  rel regclass := to_regclass(name);
  by_superuser boolean;
begin
  select r.rolsuper into by_superuser
    from pg_class c join pg_namespace n on n.oid = c.relnamespace join pg_roles r on r.oid = c.relowner
   where c.oid = rel and c.relkind = 'r' and _strata_load.is_platform_schema(n.nspname);
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

-- A table of the platform's schemas that a superuser owns: only its rows are Strata's to write.
create or replace function _strata_load.strata_table(name text) returns regclass
language plpgsql stable set search_path = pg_catalog, pg_temp as $$
declare
  rel regclass := _strata_load.platform_table(name);
begin
  if not (select r.rolsuper from pg_class c join pg_roles r on r.oid = c.relowner where c.oid = rel) then
    raise exception '% is not Strata''s to load', name;
  end if;
  return rel;
end
$$;

-- Drops the user's schemas, each whole. public is made again at once, as pg_database_owner's with the
-- privileges and comment it had (the tenant cannot change those): only what was in it goes.
create or replace function _strata_load.drop_user_schemas(key text, schemas text[]) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
  s text;
  public_acl aclitem[];
  public_comment text;
  g record;
begin
  perform _strata_load.session_owner(key);
  select n.nspacl, obj_description(n.oid, 'pg_namespace') into public_acl, public_comment
    from pg_namespace n where n.nspname = 'public';
  foreach s in array schemas loop
    if _strata.is_internal_schema(s) or _strata_load.is_platform_schema(s) then
      raise exception 'schema % is not a user schema', s;
    end if;
    execute format('drop schema if exists %I cascade', s);
  end loop;
  if 'public' = any(schemas) then
    create schema public authorization pg_database_owner;
    for g in select a.grantee, a.privilege_type, a.is_grantable from aclexplode(public_acl) a
              where a.grantee <> 'pg_database_owner'::regrole loop
      execute format('grant %s on schema public to %s%s', g.privilege_type,
        case when g.grantee = 0 then 'public' else quote_ident(pg_get_userbyid(g.grantee)) end,
        case when g.is_grantable then ' with grant option' else '' end);
    end loop;
    execute format('comment on schema public is %L', public_comment);
  end if;
end
$$;

-- Empties tables of the platform's schemas (in one statement: foreign keys between them allow it).
create or replace function _strata_load.truncate_platform_tables(key text, tables text[]) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp set session_replication_role = replica as $$
declare
  names text;
begin
  perform _strata_load.session_owner(key);
  select string_agg(_strata_load.platform_table(t)::text, ', ') into names from unnest(tables) t;
  if names is not null then
    execute 'truncate table only ' || names;
  end if;
end
$$;

-- A staging table for rows of a platform table a superuser owns: made here (so the tenant can neither alter
-- nor replace it), with the target's types for `columns`; the owner role may insert into it, nothing more.
-- Answers its name, qualified whatever the session's search_path.
create or replace function _strata_load.stage(key text, target text, columns text[]) returns text
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
  owner_role name := _strata_load.session_owner(key);
  rel regclass := _strata_load.strata_table(target);
  staged text := 'strata_stage_' || md5(random()::text || clock_timestamp()::text);
begin
  if cardinality(columns) = 0 or exists (
    select from unnest(columns) c where not exists (
      select from pg_attribute a where a.attrelid = rel and a.attname = c and a.attnum > 0
         and not a.attisdropped and a.attgenerated = '')) then
    raise exception 'columns % are not those of %', columns, target;
  end if;
  execute format('create temporary table %I on commit drop as select %s from only %s with no data', staged,
    (select string_agg(format('%I', c), ', ' order by o) from unnest(columns) with ordinality u(c, o)), rel);
  execute format('grant insert on table pg_temp.%I to %I', staged, owner_role);
  return format('pg_temp.%I', staged);
end
$$;

-- Writes the staged rows into their table (rows already there kept), foreign keys and triggers off as in a
-- restore, and drops the staging table; answers how many rows were written.
create or replace function _strata_load.load_staged(key text, staged regclass, target text) returns bigint
language plpgsql security definer set search_path = pg_catalog, pg_temp set session_replication_role = replica as $$
declare
  owner_role name := _strata_load.session_owner(key);
  rel regclass := _strata_load.strata_table(target);
  columns text;
  written bigint;
begin
  if not exists (select from pg_class c where c.oid = staged and c.relkind = 'r'
                    and c.relnamespace = pg_my_temp_schema() and c.relname like 'strata\_stage\_%'
                    and c.relowner = (select oid from pg_roles where rolname = current_user)) then
    raise exception '% is not a staging table of this load', staged;
  end if;
  select string_agg(format('%I', a.attname), ', ' order by a.attnum) into columns
    from pg_attribute a where a.attrelid = staged and a.attnum > 0 and not a.attisdropped;
  execute format('insert into %s (%s) overriding system value select %s from only %s on conflict do nothing',
    rel, columns, columns, staged);
  get diagnostics written = row_count;
  execute format('drop table %s', staged);
  return written;
end
$$;

-- Sets the position of a sequence of the platform's schemas that a superuser owns.
create or replace function _strata_load.set_platform_sequence(key text, seq_name text, seq_value bigint,
  is_called boolean) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
  rel regclass := to_regclass(seq_name);
begin
  perform _strata_load.session_owner(key);
  if not exists (select from pg_class c join pg_namespace n on n.oid = c.relnamespace
                   join pg_roles r on r.oid = c.relowner
                  where c.oid = rel and c.relkind = 'S' and r.rolsuper and _strata_load.is_platform_schema(n.nspname)) then
    raise exception '% is not a sequence Strata owns', seq_name;
  end if;
  perform setval(rel, seq_value, is_called);
end
$$;

revoke all on all functions in schema _strata_load from public;
grant execute on function _strata_load.drop_user_schemas(text, text[]), _strata_load.truncate_platform_tables(text, text[]),
  _strata_load.stage(text, text, text[]), _strata_load.load_staged(text, regclass, text),
  _strata_load.set_platform_sequence(text, text, bigint, boolean), _strata_load.is_internal_schema(text),
  _strata_load.is_platform_schema(text)
  to public;
