-- The schema check (820) runs ahead of each data request's settings, as whatever role the connection's session
-- is in at that moment: the project's login, or a role tenant code moved the session to for good (`set role
-- authenticator`, `set role anon` in a function, not `set local`), which the next request's role setting still
-- overrides. A check the session's role may not read would refuse every later request on that connection, so
-- the count of schema changes is readable by every role (it tells nothing beyond its own database's DDL count),
-- and the shared API login may reach it too (anon, authenticated and service_role already use `extensions`).
grant select on extensions.strata_schema_changes to public;
do $$
begin
  if exists (select from pg_roles where rolname = 'authenticator') then
    grant usage on schema extensions to authenticator;
  end if;
end
$$;
