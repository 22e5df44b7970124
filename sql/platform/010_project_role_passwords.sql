-- Passwords of the project roles Strata logs in as for the Management API's SQL (strata_sql_<ref>) and
-- read-only SQL (strata_read_<ref>); generated when a project is first opened.
alter table platform.projects add column if not exists sql_role_password text;
alter table platform.projects add column if not exists read_role_password text;
