-- Strata's own functions in a project database resolve nothing through the caller's search_path: the
-- platform's advisors (and the CLI's `db advisors`, which lints every schema but the platform's) would report
-- them to the user as their own "function_search_path_mutable" finding, and a tenant's object earlier on the
-- path would be chosen over pg_catalog's. Both reference pg_catalog only.
--   _strata_load.is_platform_schema   (630)
--   _strata_graphql.at_most           (950 defines it pinned; a database that ran 950 before gets it here)
alter function _strata_load.is_platform_schema(text) set search_path = pg_catalog, pg_temp;
do $$
begin
  if to_regprocedure('_strata_graphql.at_most(text, bigint, integer)') is not null then
    alter function _strata_graphql.at_most(text, bigint, integer) set search_path = pg_catalog, pg_temp;
  end if;
end
$$;
