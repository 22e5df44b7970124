-- cron: pg_cron's SQL interface (schema cron, cron.job, cron.job_run_details, schedule, unschedule, alter_job,
-- schedule_in_database) where the pg_cron binary is not available, which is the embedded cluster's case. Strata's
-- scheduler (src/jobs/modules/cron.ts) runs the jobs: it claims each slot once across every Strata node (a row
-- of cron._job_state per job), runs the command on the project's SQL login as the job's role, and records the
-- run in cron.job_run_details as pg_cron does.
--
-- Writes go through the caller's own rights, as the functions are security invoker: the caller's role is the
-- job's (pg_cron records current_user), row security shows each role its own jobs and runs, and the guard
-- trigger below refuses what pg_cron refuses (another role's job, an invalid schedule, a role without CONNECT).
-- The owner gets its privileges from _strata.grant_modules, as the platform's postgres has them.
--
-- Where the cluster has pg_cron loaded for this very database (a DATABASE_URL cluster whose cron.database_name
-- names it), the real extension is created instead, and Strata's scheduler leaves the project to it.

create or replace function _strata.install_cron() returns void
language plpgsql set search_path = pg_catalog, pg_temp as $install$
begin
  create schema if not exists cron;
  revoke all on schema cron from public;

  create sequence if not exists cron.jobid_seq;
  create sequence if not exists cron.runid_seq;

  create table if not exists cron.job (
    jobid bigint primary key default nextval('cron.jobid_seq'),
    schedule text not null,
    command text not null,
    nodename text not null default 'localhost',
    nodeport integer not null default coalesce(inet_server_port(), 5432),
    database text not null default current_database(),
    username text not null default current_user,
    active boolean not null default true,
    jobname text,
    constraint jobname_username_uniq unique (jobname, username)
  );
  alter sequence cron.jobid_seq owned by cron.job.jobid;

  create table if not exists cron.job_run_details (
    jobid bigint,
    runid bigint primary key default nextval('cron.runid_seq'),
    job_pid integer,
    database text,
    username text,
    command text,
    status text,
    return_message text,
    start_time timestamptz,
    end_time timestamptz
  );
  alter sequence cron.runid_seq owned by cron.job_run_details.runid;
  create index if not exists job_run_details_jobid_runid_idx on cron.job_run_details (jobid, runid);

  -- The scheduler's state: the last slot claimed for each job, and until when the node running it holds it
  -- (a run holds its job: a slot that comes while it runs is skipped, and a node that stopped mid-run lets go
  -- when its lease ends).
  create table if not exists cron._job_state (
    jobid bigint primary key references cron.job (jobid) on delete cascade,
    last_slot timestamptz not null,
    lease_until timestamptz
  );

  alter table cron.job enable row level security;
  alter table cron.job_run_details enable row level security;
  drop policy if exists cron_job_policy on cron.job;
  create policy cron_job_policy on cron.job using (username = current_user);
  drop policy if exists cron_job_run_details_policy on cron.job_run_details;
  create policy cron_job_run_details_policy on cron.job_run_details using (username = current_user);
  drop policy if exists strata_cron_scheduler on cron.job;
  create policy strata_cron_scheduler on cron.job to strata_cron using (true);
  drop policy if exists strata_cron_scheduler on cron.job_run_details;
  create policy strata_cron_scheduler on cron.job_run_details to strata_cron using (true) with check (true);

  -- The values of one field of a cron schedule between lo and hi: `*`, `n`, `a-b`, each with an optional
  -- `/step`, comma-separated; names (jan, mon) count from name_base.
  create or replace function cron._schedule_field(field text, lo integer, hi integer, names text[], name_base integer)
  returns integer[] language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
  declare
    part text;
    bounds text;
    step integer;
    a integer;
    b integer;
    found integer[] := '{}';
  begin
    foreach part in array string_to_array(field, ',') loop
      step := 1;
      bounds := part;
      if position('/' in part) > 0 then
        bounds := split_part(part, '/', 1);
        if split_part(part, '/', 2) !~ '^\d{1,4}$' or split_part(part, '/', 3) <> '' then
          raise exception 'invalid step in %', part;
        end if;
        step := split_part(part, '/', 2)::integer;
        if step < 1 then
          raise exception 'invalid step in %', part;
        end if;
      end if;
      if bounds = '*' then
        a := lo;
        b := hi;
      else
        if split_part(bounds, '-', 3) <> '' then
          raise exception 'invalid range %', bounds;
        end if;
        a := case when split_part(bounds, '-', 1) ~ '^\d{1,4}$' then split_part(bounds, '-', 1)::integer
                  else array_position(names, split_part(bounds, '-', 1)) - 1 + name_base end;
        b := case when position('-' in bounds) = 0 then (case when position('/' in part) > 0 then hi else a end)
                  when split_part(bounds, '-', 2) ~ '^\d{1,4}$' then split_part(bounds, '-', 2)::integer
                  else array_position(names, split_part(bounds, '-', 2)) - 1 + name_base end;
      end if;
      if a is null or b is null or a < lo or b > hi or a > b then
        raise exception 'invalid value in %', part;
      end if;
      found := found || array(select generate_series(a, b, step));
    end loop;
    return found;
  end
  $$;

  -- A schedule as pg_cron reads it: '[1-59] seconds', five cron fields (minute hour day-of-month month
  -- day-of-week, `$` for the month's last day) or @yearly, @monthly, @weekly, @daily, @hourly. Raises pg_cron's
  -- error for anything else.
  create or replace function cron._parse_schedule(schedule text, out seconds integer, out minutes integer[],
    out hours integer[], out doms integer[], out months integer[], out dows integer[], out dom_star boolean,
    out dow_star boolean, out last_dom boolean)
  language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
  declare
    s text := lower(btrim(coalesce(schedule, '')));
    interval_match text[] := regexp_match(s, '^(\d{1,9})\s*seconds?$');
    f text[];
  begin
    if interval_match is not null then
      seconds := interval_match[1]::integer;
      if seconds between 1 and 59 then
        return;
      end if;
    else
      s := case s when '@yearly' then '0 0 1 1 *' when '@annually' then '0 0 1 1 *' when '@monthly' then '0 0 1 * *'
                  when '@weekly' then '0 0 * * 0' when '@daily' then '0 0 * * *' when '@midnight' then '0 0 * * *'
                  when '@hourly' then '0 * * * *' else s end;
      f := regexp_split_to_array(s, '\s+');
      if array_length(f, 1) = 5 then
        begin
          minutes := cron._schedule_field(f[1], 0, 59, '{}', 0);
          hours := cron._schedule_field(f[2], 0, 23, '{}', 0);
          last_dom := f[3] = '$';
          doms := case when last_dom then '{}'::integer[] else cron._schedule_field(f[3], 1, 31, '{}', 1) end;
          months := cron._schedule_field(f[4], 1, 12,
            '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}', 1);
          dows := array(select distinct d % 7 from unnest(
            cron._schedule_field(f[5], 0, 7, '{sun,mon,tue,wed,thu,fri,sat}', 0)) d);
          dom_star := f[3] like '*%';
          dow_star := f[5] like '*%';
          return;
        exception when others then
          null; -- reported below
        end;
      end if;
    end if;
    raise exception 'invalid schedule: %', schedule using errcode = '22023',
      hint = 'Use cron format (e.g. 5 4 * * *), or interval format ''[1-59] seconds''';
  end
  $$;

  -- The slot of `schedule` that `moment` falls in (UTC, as pg_cron's default cron.timezone): the start of its second
  -- interval, or the start of its minute when the cron fields match that minute; null when no slot is due.
  create or replace function cron._due_slot(schedule text, moment timestamptz) returns timestamptz
  language plpgsql immutable set search_path = pg_catalog, pg_temp as $$
  declare
    p record;
    m timestamp := date_trunc('minute', moment at time zone 'UTC');
    this_dom boolean;
    this_dow boolean;
  begin
    p := cron._parse_schedule(schedule);
    if p.seconds is not null then
      return to_timestamp(floor(extract(epoch from moment) / p.seconds) * p.seconds);
    end if;
    if not (extract(minute from m)::integer = any(p.minutes) and extract(hour from m)::integer = any(p.hours)
            and extract(month from m)::integer = any(p.months)) then
      return null;
    end if;
    this_dom := extract(day from m)::integer = any(p.doms)
      or (p.last_dom and extract(day from m + interval '1 day')::integer = 1);
    this_dow := extract(dow from m)::integer = any(p.dows);
    if (case when p.dom_star or p.dow_star then this_dom and this_dow else this_dom or this_dow end) then
      return m at time zone 'UTC';
    end if;
    return null;
  exception when others then
    return null; -- a schedule the guard did not see (written by a superuser): never due
  end
  $$;

  -- What pg_cron refuses, for every write of a job (its functions or the table itself).
  create or replace function cron._job_guard() returns trigger
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  declare
    superuser boolean := (select rolsuper from pg_roles where rolname = current_user);
  begin
    if TG_OP = 'INSERT' and new.username is distinct from current_user::text and not superuser then
      raise exception 'must be superuser to create a job for another role';
    end if;
    if TG_OP = 'UPDATE' then
      if new.username is distinct from old.username and not superuser then
        raise exception 'must be superuser to alter username';
      end if;
      if new.jobid is distinct from old.jobid then
        raise exception 'a job''s jobid cannot change';
      end if;
    end if;
    perform cron._parse_schedule(new.schedule);
    if new.database is distinct from current_database() then
      raise exception 'jobs run in this project''s database (%), not in %', current_database(), new.database
        using errcode = '22023';
    end if;
    if not exists (select from pg_roles where rolname = new.username)
       or not has_database_privilege(new.username, current_database(), 'CONNECT') then
      raise exception 'User % does not have CONNECT privilege on %', new.username, new.database;
    end if;
    return new;
  end
  $$;
  drop trigger if exists cron_job_guard on cron.job;
  create trigger cron_job_guard before insert or update on cron.job for each row execute function cron._job_guard();

  -- A new job's slot count starts at the slot now due, so its first run is at its next slot, as with pg_cron.
  create or replace function cron._job_slot_start() returns trigger
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
  begin
    insert into cron._job_state (jobid, last_slot)
      values (new.jobid, coalesce(cron._due_slot(new.schedule, now()), now()))
      on conflict (jobid) do nothing;
    return null;
  end
  $$;
  alter function cron._job_slot_start() owner to strata_cron;
  drop trigger if exists cron_job_slot_start on cron.job;
  create trigger cron_job_slot_start after insert on cron.job for each row execute function cron._job_slot_start();

  -- cron.log_statement (on unless the database's setting says off): the job's command in the server's log,
  -- in pg_cron's words, from the job's own session.
  create or replace function cron._log_statement(job_id bigint, command text) returns void
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  begin
    raise log 'cron job % starting: %', job_id, command;
  end
  $$;

  create or replace function cron.schedule(schedule text, command text) returns bigint
  language sql strict set search_path = pg_catalog, pg_temp as $$
    insert into cron.job (schedule, command) values (schedule, command) returning jobid
  $$;
  comment on function cron.schedule(text, text) is 'schedule a pg_cron job';

  create or replace function cron.schedule(job_name text, schedule text, command text) returns bigint
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  #variable_conflict use_variable
  declare
    id bigint;
  begin
    if job_name is null then raise exception 'job_name can not be NULL'; end if;
    if schedule is null then raise exception 'schedule can not be NULL'; end if;
    if command is null then raise exception 'command can not be NULL'; end if;
    insert into cron.job as j (schedule, command, jobname) values (schedule, command, job_name)
      on conflict on constraint jobname_username_uniq
      do update set schedule = excluded.schedule, command = excluded.command, database = excluded.database
      returning j.jobid into id;
    return id;
  end
  $$;
  comment on function cron.schedule(text, text, text) is 'schedule a pg_cron job';

  create or replace function cron.schedule_in_database(job_name text, schedule text, command text, database text,
    username text default null, active boolean default true) returns bigint
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  #variable_conflict use_variable
  declare
    id bigint;
  begin
    if job_name is null then raise exception 'job_name can not be NULL'; end if;
    if schedule is null then raise exception 'schedule can not be NULL'; end if;
    if command is null then raise exception 'command can not be NULL'; end if;
    if username is not null and not (select rolsuper from pg_roles where rolname = current_user) then
      raise exception 'must be superuser to create a job for another role';
    end if;
    insert into cron.job as j (schedule, command, database, username, active, jobname)
      values (schedule, command, database, coalesce(username, current_user), coalesce(active, true), job_name)
      on conflict on constraint jobname_username_uniq
      do update set schedule = excluded.schedule, command = excluded.command, database = excluded.database
      returning j.jobid into id;
    return id;
  end
  $$;
  comment on function cron.schedule_in_database(text, text, text, text, text, boolean) is 'schedule a pg_cron job';

  create or replace function cron.unschedule(job_id bigint) returns boolean
  language plpgsql strict set search_path = pg_catalog, pg_temp as $$
  begin
    delete from cron.job where jobid = job_id;
    if not found then
      raise exception 'could not find valid entry for job %', job_id;
    end if;
    return true;
  end
  $$;
  comment on function cron.unschedule(bigint) is 'unschedule a pg_cron job';

  create or replace function cron.unschedule(job_name text) returns boolean
  language plpgsql strict set search_path = pg_catalog, pg_temp as $$
  begin
    delete from cron.job where jobname = job_name and username = current_user;
    if not found then
      raise exception 'could not find valid entry for job ''%''', job_name;
    end if;
    return true;
  end
  $$;
  comment on function cron.unschedule(text) is 'unschedule a pg_cron job';

  create or replace function cron.alter_job(job_id bigint, schedule text default null, command text default null,
    database text default null, username text default null, active boolean default null) returns void
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  begin
    if job_id is null then
      raise exception 'job_id can not be NULL';
    end if;
    if alter_job.username is not null and not (select rolsuper from pg_roles where rolname = current_user) then
      raise exception 'must be superuser to alter username';
    end if;
    if num_nulls(alter_job.schedule, alter_job.command, alter_job.database, alter_job.username, alter_job.active) = 5 then
      raise exception 'no updates specified'
        using hint = 'You must specify at least one job attribute to change when calling alter_job';
    end if;
    update cron.job j set
      schedule = coalesce(alter_job.schedule, j.schedule),
      command = coalesce(alter_job.command, j.command),
      database = coalesce(alter_job.database, j.database),
      username = coalesce(alter_job.username, j.username),
      active = coalesce(alter_job.active, j.active)
     where j.jobid = job_id;
    if not found then
      raise exception 'Job % does not exist or you don''t own it', job_id;
    end if;
  end
  $$;
  comment on function cron.alter_job(bigint, text, text, text, text, boolean)
    is 'Alter the job identified by job_id. Any option left as NULL will not be modified.';

  revoke all on all functions in schema cron from public;
  revoke all on all tables in schema cron from public;
  revoke all on all sequences in schema cron from public;
  -- The schedule's parsing is pure: whoever may write a job may have it checked.
  grant execute on function cron._schedule_field(text, integer, integer, text[], integer),
    cron._parse_schedule(text), cron._due_slot(text, timestamptz), cron._log_statement(bigint, text) to public;
  grant select on cron.jobid_seq, cron.runid_seq to public;

  grant usage on schema cron to strata_cron;
  grant select on cron.job to strata_cron;
  grant select, insert, update, delete on cron.job_run_details, cron._job_state to strata_cron;
  grant usage on sequence cron.runid_seq to strata_cron;
end
$install$;
revoke all on function _strata.install_cron() from public;

do $$
begin
  if exists (select from pg_available_extensions where name = 'pg_cron')
     and 'pg_cron' = any(string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','))
     and current_setting('cron.database_name', true) = current_database() then
    create extension if not exists pg_cron;
  else
    perform _strata.install_cron();
  end if;
end
$$;
