-- Password of the role the auth service logs in as (strata_auth_<ref>, sql/project/640_auth_role.sql), sealed;
-- generated when a project is first opened.
alter table platform.projects add column if not exists auth_role_password text;
