-- vault in the data API's sessions: each new connection of a project's data pool gets the project's vault key
-- as Strata's sessions of the owner do (open, COPY, seal before the connection serves its first request:
-- src/modules/vault.ts), so vault.decrypted_secrets decrypts for the roles granted it (service_role, the owner's
-- security-definer functions) and anon and authenticated still have no privilege on it. For that the project's
-- data login may run vault's two session functions. The login is also reachable by tenant functions
-- (`reset role`), which gains them nothing: it may already become service_role, and those functions only
-- replace the session's key table with an empty one (no role but strata_vault reads it).
-- 650's ensure_project_authenticator, with that grant.
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
end
$$;
revoke all on function _strata.ensure_project_authenticator(text, text) from public;
