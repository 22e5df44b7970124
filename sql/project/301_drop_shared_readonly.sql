-- Read-only SQL used to run as one cluster-wide role holding pg_read_all_data, which could read every
-- database it could connect to. Each project now has its own read-only role (010_project_roles.sql).
drop role if exists strata_readonly;
