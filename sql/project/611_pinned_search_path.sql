-- What Strata's superuser runs in a project database resolves nothing from the tenant's schemas. Without a
-- pinned search_path these functions used the calling session's, the superuser's default ("$user", public),
-- and public is the project owner's: a function it created there that matches a call better than
-- pg_catalog's (format(text, text) for format('... %I ...', name)) ran as the superuser.
--   ensure_project_roles  run by Strata's superuser every time it opens the project;
--   notify_ddl            the DDL watch, fired in every session that runs DDL, the superuser's included.
alter function _strata.ensure_project_roles(text, text, text) set search_path = pg_catalog, pg_temp;
alter function _strata.notify_ddl() set search_path = pg_catalog, pg_temp;
