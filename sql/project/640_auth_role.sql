-- The auth service (/auth/v1) logs in as a role of its project, strata_auth_<ref>, not as the superuser: the
-- project's Postgres-function hooks, and whatever else of the tenant its statements reach (a trigger on a
-- table a foreign key cascades to), run as that role. It is no superuser and holds no cluster-wide power; it
-- may connect to its project's database only and use the auth schema's tables, not change them (their owner
-- stays the superuser, so it cannot add triggers or defaults that Strata's own statements would then run).
--
-- supabase_auth_admin is the platform's name of the auth server's role, the one its docs tell users to grant
-- their hooks and hook tables to (`grant execute on function public.custom_access_token_hook to
-- supabase_auth_admin`). Here it is a cluster-wide NOLOGIN role holding the auth schema's privileges in every
-- project database; each project's auth role inherits them as a member that may not become it (SET FALSE,
-- PostgreSQL 16+): a role may change its own defaults for every database (`alter role ... set`), and this one
-- is every project's.
do $$
begin
  if not exists (select from pg_roles where rolname = 'supabase_auth_admin') then
    create role supabase_auth_admin nologin noinherit;
  end if;
exception when duplicate_object or unique_violation then
  null; -- another project's bootstrap made it a moment ago
end
$$;

create or replace function _strata.ensure_auth_role(ref text, password text)
returns void language plpgsql set search_path = pg_catalog as $$
declare
  auth_role text := 'strata_auth_' || ref;
  other record;
  setting record;
begin
  if ref !~ '^[a-z]{20}$' then
    raise exception 'invalid project ref %', ref;
  end if;
  if not exists (select from pg_roles where rolname = auth_role) then
    execute format('create role %I login', auth_role);
  end if;
  execute format('alter role %I login nosuperuser nocreatedb nocreaterole noreplication nobypassrls inherit password %L',
    auth_role, password);
  -- Defaults its own code set for itself (a role may change its own): Strata's sessions start as Strata made them.
  -- Read-only mode is Strata's own default of the role in this database (src/management/database-config/readonly.ts).
  for setting in
    select s.setdatabase <> 0 as in_database, split_part(c, '=', 1) as name
      from pg_db_role_setting s, unnest(s.setconfig) c
     where s.setrole = auth_role::regrole
       and s.setdatabase in (0, (select oid from pg_database where datname = current_database()))
  loop
    continue when setting.in_database and setting.name = 'default_transaction_read_only';
    if setting.in_database then
      execute format('alter role %I in database %I reset %I', auth_role, current_database(), setting.name);
    else
      execute format('alter role %I reset %I', auth_role, setting.name);
    end if;
  end loop;

  -- No role is a member of the auth role (the project's owner must not become it), and it is a member of
  -- supabase_auth_admin only.
  for other in
    select r.rolname from pg_auth_members m join pg_roles r on r.oid = m.member join pg_roles a on a.oid = m.roleid
     where a.rolname = auth_role
  loop
    execute format('revoke %I from %I', auth_role, other.rolname);
  end loop;
  for other in
    select r.rolname from pg_auth_members m join pg_roles r on r.oid = m.roleid join pg_roles a on a.oid = m.member
     where a.rolname = auth_role and r.rolname <> 'supabase_auth_admin'
  loop
    execute format('revoke %I from %I', other.rolname, auth_role);
  end loop;
  if current_setting('server_version_num')::int >= 160000 then
    execute format('grant supabase_auth_admin to %I with inherit true, set false', auth_role);
  else
    execute format('grant supabase_auth_admin to %I', auth_role);
  end if;

  execute format('grant connect on database %I to %I', current_database(), auth_role);

  -- What the auth service does with the auth schema: read and write rows, draw ids, call its helpers.
  grant usage on schema auth to supabase_auth_admin;
  grant select, insert, update, delete on all tables in schema auth to supabase_auth_admin;
  grant usage, select, update on all sequences in schema auth to supabase_auth_admin;
  grant execute on all functions in schema auth to supabase_auth_admin;
end
$$;
revoke all on function _strata.ensure_auth_role(text, text) from public;
