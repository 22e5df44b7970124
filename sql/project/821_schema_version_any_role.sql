-- The schema check (820) runs ahead of each data request's settings, as whatever role the connection's session
-- is in at that moment: the project's login, or a role tenant code moved the session to for good (`set role
-- authenticator`, `set role anon` in a function, not `set local`), which the next request's role setting still
-- overrides. A check the session's role may not read would refuse every later request on that connection, so
-- the roles the login may become read the count (it tells nothing beyond its own database's DDL count). Not
-- `public`: a role without usage on `extensions` that lists the tables it may read (postgres-meta's query, as the
-- MCP server's list_tables runs it read-only) would then fail on this one's name.
do $$
declare
  api_role text;
begin
  foreach api_role in array array['authenticator', 'anon', 'authenticated', 'service_role'] loop
    if exists (select from pg_roles where rolname = api_role) then
      execute format('grant usage on schema extensions to %I', api_role);
      execute format('grant select on extensions.strata_schema_changes to %I', api_role);
    end if;
  end loop;
end
$$;
