-- Least privilege: each project's database is reached by roles of that project only, none of them a
-- superuser or holding a cluster-wide power. Roles are cluster-wide, so every role is named after its project:
--   postgres_<ref>     the project's owner (as the platform's `postgres`, not a superuser): owns the user
--                      schemas' objects, may switch to anon/authenticated/service_role; logs in only once
--                      its password is set (PATCH /v1/projects/{ref}/database/password);
--   strata_sql_<ref>   the login Strata uses for the Management API's SQL and migrations: a member of the owner;
--   strata_read_<ref>  the login for read-only SQL: SELECT on the project's schemas, nothing else.
-- Strata calls _strata.ensure_project_roles when it opens a project; it is idempotent and also repairs what
-- earlier versions granted (pg_read_all_data, pg_write_all_data, CONNECT for PUBLIC).

-- Schemas Strata itself manages: never handed to the owner, never readable through the read-only role.
create or replace function _strata.is_internal_schema(name text) returns boolean
language sql immutable as $$
  select name like 'pg\_%' or name in ('information_schema', 'platform', '_strata', '_strata_graphql', 'strata_migrations')
$$;

create or replace function _strata.ensure_project_roles(ref text, sql_password text, read_password text)
returns void language plpgsql as $$
declare
  owner_role text := 'postgres_' || ref;
  sql_role text := 'strata_sql_' || ref;
  read_role text := 'strata_read_' || ref;
  powerful text;
  obj record;
begin
  if ref !~ '^[a-z]{20}$' then
    raise exception 'invalid project ref %', ref;
  end if;
  if not exists (select from pg_roles where rolname = owner_role) then
    execute format('create role %I nologin', owner_role);
  end if;
  if not exists (select from pg_roles where rolname = sql_role) then
    execute format('create role %I login', sql_role);
  end if;
  if not exists (select from pg_roles where rolname = read_role) then
    execute format('create role %I login', read_role);
  end if;
  execute format('alter role %I nosuperuser nocreatedb nocreaterole noreplication nobypassrls inherit', owner_role);
  execute format('alter role %I login nosuperuser nocreatedb nocreaterole noreplication nobypassrls inherit password %L',
    sql_role, sql_password);
  execute format('alter role %I login nosuperuser nocreatedb nocreaterole noreplication nobypassrls inherit password %L',
    read_role, read_password);
  execute format('alter role %I set default_transaction_read_only = on', read_role);

  -- Powers that reach beyond one database, granted by earlier versions or by hand: taken back.
  foreach powerful in array array['pg_read_all_data', 'pg_write_all_data', 'pg_read_server_files',
    'pg_write_server_files', 'pg_execute_server_program', 'pg_signal_backend', 'pg_monitor']
  loop
    if exists (select from pg_auth_members m join pg_roles g on g.oid = m.roleid join pg_roles r on r.oid = m.member
               where g.rolname = powerful and r.rolname in (owner_role, sql_role, read_role)) then
      execute format('revoke %I from %I, %I, %I', powerful, owner_role, sql_role, read_role);
    end if;
  end loop;

  execute format('grant anon, authenticated, service_role to %I', owner_role);
  execute format('grant %I to %I', owner_role, sql_role);

  -- Only the project's own roles (and Strata's data login) may connect to its database.
  execute format('revoke connect on database %I from public', current_database());
  -- The cluster's maintenance databases are nobody's project either.
  for obj in select datname from pg_database where datname in ('postgres', 'template1') and datname <> current_database() loop
    execute format('revoke connect on database %I from public', obj.datname);
  end loop;
  execute format('grant connect, temporary, create on database %I to %I', current_database(), owner_role);
  execute format('grant connect on database %I to %I, %I, authenticator', current_database(), sql_role, read_role);

  -- The owner owns the user schemas and what is in them (objects made before, by the superuser).
  for obj in
    select n.nspname from pg_namespace n
     where not _strata.is_internal_schema(n.nspname) and n.nspname <> 'auth'
       and pg_get_userbyid(n.nspowner) <> owner_role
       and (select rolsuper from pg_roles where oid = n.nspowner)
  loop
    execute format('alter schema %I owner to %I', obj.nspname, owner_role);
  end loop;
  for obj in
    select c.oid, n.nspname, c.relname, c.relkind from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where c.relkind in ('r', 'p', 'v', 'm', 'f', 'S')
       and not _strata.is_internal_schema(n.nspname) and n.nspname <> 'auth'
       and (select rolsuper from pg_roles where oid = c.relowner)
       and not exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype in ('e', 'a', 'i'))
  loop
    execute format('alter %s %I.%I owner to %I',
      case obj.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table'
        when 'S' then 'sequence' else 'table' end,
      obj.nspname, obj.relname, owner_role);
  end loop;
  for obj in
    select p.oid::regprocedure::text as signature, p.prokind from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where not _strata.is_internal_schema(n.nspname) and n.nspname <> 'auth'
       and (select rolsuper from pg_roles where oid = p.proowner)
       and not exists (select from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
  loop
    execute format('alter %s %s owner to %I', case obj.prokind when 'p' then 'procedure' when 'a' then 'aggregate' else 'function' end,
      obj.signature, owner_role);
  end loop;
  for obj in
    select t.oid::regtype::text as name from pg_type t join pg_namespace n on n.oid = t.typnamespace
     where (t.typtype in ('e', 'd', 'r') or (t.typtype = 'c' and (select relkind from pg_class where oid = t.typrelid) = 'c'))
       and not _strata.is_internal_schema(n.nspname) and n.nspname <> 'auth'
       and (select rolsuper from pg_roles where oid = t.typowner)
       and not exists (select from pg_depend d where d.classid = 'pg_type'::regclass and d.objid = t.oid and d.deptype = 'e')
  loop
    execute format('alter type %s owner to %I', obj.name, owner_role);
  end loop;

  -- public belongs to pg_database_owner: the owner gets to create in it, and what it creates there is the
  -- API roles' to use (RLS and revokes narrow it), as on the platform.
  execute format('grant all on schema public to %I', owner_role);
  execute format('alter default privileges for role %I in schema public grant all on tables to anon, authenticated, service_role', owner_role);
  execute format('alter default privileges for role %I in schema public grant all on routines to anon, authenticated, service_role', owner_role);
  execute format('alter default privileges for role %I in schema public grant all on sequences to anon, authenticated, service_role', owner_role);
  -- The owner may read and reference the auth tables (foreign keys to auth.users, as on the platform).
  execute format('grant usage on schema auth to %I', owner_role);
  execute format('grant select, references on all tables in schema auth to %I', owner_role);

  -- Migrations are the owner's, as the platform's supabase_migrations are postgres's.
  execute format('grant usage on schema strata_migrations to %I', owner_role);
  execute format('grant select, insert, update, delete on all tables in schema strata_migrations to %I', owner_role);

  -- The read-only role reads the project's schemas (auth included) and nothing of Strata's own.
  for obj in select n.nspname from pg_namespace n where not _strata.is_internal_schema(n.nspname) loop
    execute format('grant usage on schema %I to %I', obj.nspname, read_role);
    execute format('grant select on all tables in schema %I to %I', obj.nspname, read_role);
  end loop;
  execute format('alter default privileges for role %I grant select on tables to %I', owner_role, read_role);
  execute format('alter default privileges for role %I grant usage on schemas to %I', owner_role, read_role);
end
$$;
revoke all on function _strata.ensure_project_roles(text, text, text) from public;
