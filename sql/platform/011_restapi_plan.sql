-- PostgREST's db-plan-enabled: `Accept: application/vnd.pgrst.plan` answers query plans only where the
-- project turned it on, since a plan shows table sizes and policies to whoever asks.
alter table platform.restapi_config add column if not exists db_plan_enabled boolean not null default false;
