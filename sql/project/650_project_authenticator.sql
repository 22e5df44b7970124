-- Each project's data requests log in as a role of that project, `authenticator_<ref>`, not as the
-- cluster-wide `authenticator`. PostgreSQL lets any role change its own defaults in every database
-- (`alter role authenticator in database other_project set statement_timeout = '1ms'` needs no privilege),
-- and a tenant's function can reach the login role of its session with `reset role`: with one shared login,
-- one tenant could change how every other project's data connections start. A project's own login is the
-- only role its tenant can reach that way, and it logs in to that project's database only.
-- It is a member of `authenticator`, so it may switch to every role `authenticator` may (anon,
-- authenticated, service_role and the roles a project grants to `authenticator`, as with PostgREST).
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
end
$$;
revoke all on function _strata.ensure_project_authenticator(text, text) from public;
