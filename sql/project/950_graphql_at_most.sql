-- atMost of pg_graphql's update and delete mutations: the statement calls this with the number of rows it
-- affected; past the limit it fails with its own SQLSTATE (SGQ01), which the server matches by code, and
-- the request's transaction rolls back. In a schema of its own, usable by every role that runs mutations.
create schema if not exists _strata_graphql;
grant usage on schema _strata_graphql to public;

create or replace function _strata_graphql.at_most(kind text, affected bigint, at_most integer) returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
  if affected > at_most then
    raise exception '% impacts too many records', kind using errcode = 'SGQ01';
  end if;
  return true;
end
$$;

grant execute on function _strata_graphql.at_most(text, bigint, integer) to public;
