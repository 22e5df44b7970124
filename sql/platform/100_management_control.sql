-- Management API control plane: organization plan, rate-limit counters shared by every Strata process, and a
-- notice to every process when a project's row changes (pause, restore, rename, delete).
alter table platform.organizations add column if not exists plan text not null default 'free';

-- rate-limiter-flexible's Postgres store layout (created here so the API roles never need DDL rights).
create table if not exists platform.rate_limits (
  key varchar(255) primary key,
  points integer not null default 0,
  expire bigint
);

create or replace function platform.notify_project_changed() returns trigger
language plpgsql as $$
begin
  perform pg_notify('strata_project_changed', coalesce(new.ref, old.ref));
  return null;
end
$$;

drop trigger if exists project_changed on platform.projects;
create trigger project_changed after update or delete on platform.projects
  for each row execute function platform.notify_project_changed();

-- OAuth access tokens name the application they were issued to: rate limits count per application.
alter table platform.access_tokens add column if not exists oauth_app_id text;
