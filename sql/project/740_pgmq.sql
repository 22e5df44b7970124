-- Queues: pgmq's SQL interface (version 1.5.1), in every project as on the platform once the extension is
-- enabled, written in SQL and PL/pgSQL (the embedded cluster ships no pgmq binary; pgmq itself is SQL).
--   pgmq.meta                      one row per queue (name as given, partitioned, unlogged, created_at);
--   pgmq.q_<name> / pgmq.a_<name>  a queue's messages and its archive (name lowercased, as pgmq does);
--   pgmq.message_record            what read, pop and set_vt return.
-- Every function runs as its caller (security invoker), so the queue tables' grants and row level security
-- decide who may send, read or archive, as with the extension. The one exception is the upkeep of
-- partitioned queues (pgmq's partman jobs): a security definer function that the project's owner owns.
--
-- Built in a schema of its own, then renamed to pgmq only when the database has none: a project that
-- installed the real extension (a cluster of the user's own) or made a schema of that name keeps it.
set local check_function_bodies = off;
create schema _strata_pgmq_build;

create table _strata_pgmq_build.meta (
  queue_name varchar unique not null,
  is_partitioned boolean not null,
  is_unlogged boolean not null,
  created_at timestamptz default now() not null
);

-- How a partitioned queue is cut and kept (pg_partman's part_config for pgmq's queues).
create table _strata_pgmq_build._partitions (
  queue_name varchar primary key references _strata_pgmq_build.meta (queue_name) on delete cascade,
  partition_col text not null check (partition_col in ('msg_id', 'enqueued_at')),
  partition_interval text not null,
  retention_interval text not null
);

create type _strata_pgmq_build.message_record as (
  msg_id bigint,
  read_ct integer,
  enqueued_at timestamptz,
  vt timestamptz,
  message jsonb,
  headers jsonb
);

create type _strata_pgmq_build.queue_record as (
  queue_name varchar,
  is_partitioned boolean,
  is_unlogged boolean,
  created_at timestamptz
);

create type _strata_pgmq_build.metrics_result as (
  queue_name text,
  queue_length bigint,
  newest_msg_age_sec int,
  oldest_msg_age_sec int,
  total_messages bigint,
  scrape_time timestamptz,
  queue_visible_length bigint
);

---------------------------------------------------------------------------------------------------------
-- Names and checks
---------------------------------------------------------------------------------------------------------

-- Serialises the creation and removal of one queue until the transaction ends.
create function _strata_pgmq_build.acquire_queue_lock(queue_name text) returns void
language sql as $$
  select pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('pgmq.queue_' || queue_name))
$$;

-- The table of a queue: prefix, underscore, the name lowercased; names that could end a statement are refused.
create function _strata_pgmq_build.format_table_name(queue_name text, prefix text) returns text
language plpgsql immutable as $$
begin
  if queue_name ~ '\$|;|--|''' then
    raise exception 'queue name contains invalid characters: $, ;, --, or \''';
  end if;
  return pg_catalog.lower(prefix || '_' || queue_name);
end
$$;

create function _strata_pgmq_build.validate_queue_name(queue_name text) returns void
language plpgsql as $$
begin
  if pg_catalog.length(queue_name) > 47 then
    raise exception 'queue name is too long, maximum length is 47 characters';
  end if;
end
$$;

create function _strata_pgmq_build._extension_exists(extension_name text) returns boolean
language sql stable as $$
  select exists (select from pg_catalog.pg_extension where extname = extension_name)
$$;

-- Whether the extension owns a table: never here (these objects belong to no extension), kept for callers.
create function _strata_pgmq_build._belongs_to_pgmq(table_name text) returns boolean
language sql stable as $$
  select exists (
    select from pg_catalog.pg_depend d join pg_catalog.pg_extension e on e.oid = d.refobjid
     where e.extname = 'pgmq' and d.objid = (select oid from pg_catalog.pg_class where relname = table_name))
$$;

-- A numeric interval cuts by msg_id, any other (a time) by enqueued_at.
create function _strata_pgmq_build._get_partition_col(partition_interval text) returns text
language plpgsql immutable as $$
begin
  perform partition_interval::bigint;
  return 'msg_id';
exception when others then
  return 'enqueued_at';
end
$$;

---------------------------------------------------------------------------------------------------------
-- Creating and dropping queues
---------------------------------------------------------------------------------------------------------

-- The queue and archive tables, their indexes and the queue's row. `persistence` is '' or 'unlogged';
-- `partition_col` is null for a plain queue. service_role may use them as the platform's "expose queues"
-- switch grants it; the API roles may draw message ids (sequence grants), the tables' grants decide the rest.
create function _strata_pgmq_build._create_tables(queue_name text, persistence text, partition_col text)
returns void language plpgsql as $$
declare
  qtable text := pgmq.format_table_name(queue_name, 'q');
  atable text := pgmq.format_table_name(queue_name, 'a');
  a_col text := case partition_col when 'enqueued_at' then 'archived_at' else partition_col end;
  seq text;
begin
  perform pgmq.validate_queue_name(queue_name);
  perform pgmq.acquire_queue_lock(queue_name);
  execute pg_catalog.format(
    'create %s table if not exists pgmq.%I (
       msg_id bigint %s generated always as identity,
       read_ct int default 0 not null,
       enqueued_at timestamptz default now() not null,
       vt timestamptz not null,
       message jsonb,
       headers jsonb)%s',
    persistence, qtable, case when partition_col is null then 'primary key' else '' end,
    case when partition_col is null then '' else pg_catalog.format(' partition by range (%I)', partition_col) end);
  execute pg_catalog.format(
    'create table if not exists pgmq.%I (
       msg_id bigint %s,
       read_ct int default 0 not null,
       enqueued_at timestamptz default now() not null,
       archived_at timestamptz default now() not null,
       vt timestamptz not null,
       message jsonb,
       headers jsonb)%s',
    atable, case when partition_col is null then 'primary key' else 'not null' end,
    case when partition_col is null then '' else pg_catalog.format(' partition by range (%I)', a_col) end);
  if partition_col is null then
    execute pg_catalog.format('create index if not exists %I on pgmq.%I (vt asc)', qtable || '_vt_idx', qtable);
  else
    execute pg_catalog.format('create index if not exists %I on pgmq.%I (%I)', qtable || '_part_idx', qtable,
      partition_col);
  end if;
  execute pg_catalog.format('create index if not exists %I on pgmq.%I (archived_at)',
    'archived_at_idx_' || queue_name, atable);
  execute pg_catalog.format('grant all on table pgmq.%I, pgmq.%I to service_role', qtable, atable);
  seq := pg_catalog.pg_get_serial_sequence(pg_catalog.format('pgmq.%I', qtable), 'msg_id');
  execute pg_catalog.format('grant usage, select, update on sequence %s to anon, authenticated, service_role', seq);
  insert into pgmq.meta (queue_name, is_partitioned, is_unlogged)
  values (queue_name, partition_col is not null, persistence = 'unlogged')
  on conflict do nothing;
end
$$;

create function _strata_pgmq_build.create_non_partitioned(queue_name text) returns void
language sql as $$ select pgmq._create_tables(queue_name, '', null) $$;

create function _strata_pgmq_build.create_unlogged(queue_name text) returns void
language sql as $$ select pgmq._create_tables(queue_name, 'unlogged', null) $$;

create function _strata_pgmq_build."create"(queue_name text) returns void
language sql as $$ select pgmq.create_non_partitioned(queue_name) $$;

-- A partitioned queue: by msg_id when the interval is a number, else by time (enqueued_at, archived_at).
-- Partitions are made ahead as messages arrive and dropped past the retention, as pg_partman's upkeep does
-- for the extension (pgmq._maintain_partitions); pg_partman itself is not needed.
create function _strata_pgmq_build.create_partitioned(
  queue_name text,
  partition_interval text default '10000',
  retention_interval text default '100000'
) returns void language plpgsql as $$
declare
  col text := pgmq._get_partition_col(partition_interval);
begin
  if col = 'msg_id' then
    if partition_interval::bigint <= 0 or retention_interval !~ '^\d+$' then
      raise exception 'a queue partitioned by msg_id needs a positive partition interval and a numeric retention';
    end if;
  else
    -- Time partitions are aligned with date_bin, which takes no months or years.
    if partition_interval::interval <= interval '0' or retention_interval::interval <= interval '0'
       or pg_catalog.date_part('month', partition_interval::interval) <> 0
       or pg_catalog.date_part('year', partition_interval::interval) <> 0 then
      raise exception 'a queue partitioned by time needs positive intervals of days, hours, minutes or seconds';
    end if;
  end if;
  perform pgmq._create_tables(queue_name, '', col);
  insert into pgmq._partitions (queue_name, partition_col, partition_interval, retention_interval)
  values (queue_name, col, partition_interval, retention_interval)
  on conflict on constraint _partitions_pkey do nothing;
  perform pgmq._maintain_partitions(queue_name, 0);
end
$$;

-- The extension moves an archive to pg_partman partitions; without pg_partman there is nothing to convert to.
create function _strata_pgmq_build.convert_archive_partitioned(
  table_name text,
  partition_interval text default '10000',
  retention_interval text default '100000',
  leading_partition int default 10
) returns void language plpgsql as $$
begin
  raise exception 'convert_archive_partitioned needs pg_partman, which this database does not have'
    using hint = 'create a partitioned queue with pgmq.create_partitioned instead';
end
$$;

-- Keeps an archive when the queue is dropped (an extension's member table would otherwise go with it).
create function _strata_pgmq_build.detach_archive(queue_name text) returns void
language plpgsql as $$
begin
  if pgmq._extension_exists('pgmq') then
    execute pg_catalog.format('alter extension pgmq drop table pgmq.%I', pgmq.format_table_name(queue_name, 'a'));
  end if;
end
$$;

create function _strata_pgmq_build.drop_queue(queue_name text) returns boolean
language plpgsql as $$
declare
  qtable text := pgmq.format_table_name(queue_name, 'q');
  atable text := pgmq.format_table_name(queue_name, 'a');
begin
  perform pgmq.acquire_queue_lock(queue_name);
  if pg_catalog.to_regclass(pg_catalog.format('pgmq.%I', qtable)) is null then
    raise notice 'pgmq queue `%` does not exist', queue_name;
    return false;
  end if;
  execute pg_catalog.format('drop table if exists pgmq.%I', qtable);
  execute pg_catalog.format('drop table if exists pgmq.%I', atable);
  delete from pgmq.meta m where m.queue_name = drop_queue.queue_name;
  return true;
end
$$;

create function _strata_pgmq_build.drop_queue(queue_name text, partitioned boolean) returns boolean
language plpgsql as $$
begin
  raise warning 'drop_queue(queue_name, partitioned) is deprecated and will be removed in PGMQ v2.0. Use drop_queue(queue_name) instead';
  return pgmq.drop_queue(queue_name);
end
$$;

---------------------------------------------------------------------------------------------------------
-- Partition upkeep
---------------------------------------------------------------------------------------------------------

-- Makes the partitions the next `upcoming` messages (and one interval beyond) fall into, in the queue and
-- its archive, and then drops those past the retention; returns at once while the partition one interval
-- ahead exists. Runs as the project's owner, who owns the queue tables: senders need no right to create
-- tables. Partitions are named <table>_<start>, the start a msg_id or an epoch second. At most
-- MAX_AHEAD (1000) partitions are made per call.
create function _strata_pgmq_build._maintain_partitions(queue_name text, upcoming bigint) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
  cfg record;
  qtable text := pgmq.format_table_name(queue_name, 'q');
  atable text := pgmq.format_table_name(queue_name, 'a');
  step bigint;
  span interval;
  current_start bigint;
  ahead_start bigint;
  keep_from bigint;
  start bigint;
  t text;
  part record;
begin
  if (select rolsuper from pg_roles where rolname = current_user) then
    raise exception 'pgmq partition upkeep runs as the project''s owner, not as a superuser';
  end if;
  select * into cfg from pgmq._partitions p where p.queue_name = _maintain_partitions.queue_name;
  if not found then
    return;
  end if;
  if cfg.partition_col = 'msg_id' then
    step := cfg.partition_interval::bigint;
    execute format('select case when is_called then last_value else 0 end from %s',
      pg_get_serial_sequence(format('pgmq.%I', qtable), 'msg_id')) into current_start;
    keep_from := current_start - cfg.retention_interval::bigint;
    ahead_start := ((current_start + least(greatest(upcoming, 0), 1000 * step)) / step + 1) * step;
    current_start := (current_start / step) * step;
  else
    span := cfg.partition_interval::interval;
    step := extract(epoch from span)::bigint;
    current_start := extract(epoch from date_bin(span, clock_timestamp(), timestamptz '2001-01-01 00:00:00+00'))::bigint;
    ahead_start := current_start + step;
    keep_from := extract(epoch from clock_timestamp() - cfg.retention_interval::interval)::bigint;
  end if;
  if to_regclass(format('pgmq.%I', qtable || '_' || ahead_start)) is not null
     and to_regclass(format('pgmq.%I', atable || '_' || ahead_start)) is not null then
    return;
  end if;
  -- Senders that reach a new interval together: one makes the partitions, the others find them made.
  perform pgmq.acquire_queue_lock(queue_name);

  foreach t in array array[qtable, atable] loop
    start := current_start;
    while start <= ahead_start loop
      if to_regclass(format('pgmq.%I', t || '_' || start)) is null then
        if cfg.partition_col = 'msg_id' then
          execute format('create table pgmq.%I partition of pgmq.%I for values from (%s) to (%s)',
            t || '_' || start, t, start, start + step);
        else
          execute format('create table pgmq.%I partition of pgmq.%I for values from (%L) to (%L)',
            t || '_' || start, t, to_timestamp(start), to_timestamp(start + step));
        end if;
      end if;
      start := start + step;
    end loop;
    -- Past the retention: partitions whose whole range lies before what is kept.
    for part in
      select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
       where i.inhparent = format('pgmq.%I', t)::regclass
         and starts_with(c.relname, t || '_') and substr(c.relname, length(t) + 2) ~ '^\d{1,18}$'
         and substr(c.relname, length(t) + 2)::bigint + step <= keep_from
    loop
      execute format('drop table pgmq.%I', part.relname);
    end loop;
  end loop;
end
$$;

---------------------------------------------------------------------------------------------------------
-- Sending
---------------------------------------------------------------------------------------------------------

-- A partitioned queue first makes room for the messages it is about to take.
create function _strata_pgmq_build._before_send(queue_name text, upcoming bigint) returns void
language plpgsql as $$
begin
  if (select c.relkind from pg_catalog.pg_class c
       where c.oid = pg_catalog.to_regclass(pg_catalog.format('pgmq.%I', pgmq.format_table_name(queue_name, 'q')))) = 'p' then
    perform pgmq._maintain_partitions(queue_name, upcoming);
  end if;
end
$$;

create function _strata_pgmq_build.send(queue_name text, msg jsonb, headers jsonb, delay timestamptz)
returns setof bigint language plpgsql as $$
begin
  perform pgmq._before_send(queue_name, 1);
  return query execute pg_catalog.format(
    'insert into pgmq.%I (vt, message, headers) values ($2, $1, $3) returning msg_id',
    pgmq.format_table_name(queue_name, 'q')) using msg, delay, headers;
end
$$;

create function _strata_pgmq_build.send(queue_name text, msg jsonb) returns setof bigint
language sql as $$ select * from pgmq.send(queue_name, msg, null, pg_catalog.clock_timestamp()) $$;

create function _strata_pgmq_build.send(queue_name text, msg jsonb, headers jsonb) returns setof bigint
language sql as $$ select * from pgmq.send(queue_name, msg, headers, pg_catalog.clock_timestamp()) $$;

create function _strata_pgmq_build.send(queue_name text, msg jsonb, delay integer) returns setof bigint
language sql as $$
  select * from pgmq.send(queue_name, msg, null, pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => delay))
$$;

create function _strata_pgmq_build.send(queue_name text, msg jsonb, delay timestamptz) returns setof bigint
language sql as $$ select * from pgmq.send(queue_name, msg, null, delay) $$;

create function _strata_pgmq_build.send(queue_name text, msg jsonb, headers jsonb, delay integer)
returns setof bigint language sql as $$
  select * from pgmq.send(queue_name, msg, headers, pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => delay))
$$;

create function _strata_pgmq_build.send_batch(queue_name text, msgs jsonb[], headers jsonb[], delay timestamptz)
returns setof bigint language plpgsql as $$
begin
  perform pgmq._before_send(queue_name, coalesce(pg_catalog.cardinality(msgs), 0));
  return query execute pg_catalog.format(
    'insert into pgmq.%I (vt, message, headers)
     select $2, m, h from rows from (pg_catalog.unnest($1), pg_catalog.unnest(coalesce($3, array[]::jsonb[]))) as u(m, h)
     returning msg_id',
    pgmq.format_table_name(queue_name, 'q')) using msgs, delay, headers;
end
$$;

create function _strata_pgmq_build.send_batch(queue_name text, msgs jsonb[]) returns setof bigint
language sql as $$ select * from pgmq.send_batch(queue_name, msgs, null, pg_catalog.clock_timestamp()) $$;

create function _strata_pgmq_build.send_batch(queue_name text, msgs jsonb[], headers jsonb[]) returns setof bigint
language sql as $$ select * from pgmq.send_batch(queue_name, msgs, headers, pg_catalog.clock_timestamp()) $$;

create function _strata_pgmq_build.send_batch(queue_name text, msgs jsonb[], delay integer) returns setof bigint
language sql as $$
  select * from pgmq.send_batch(queue_name, msgs, null, pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => delay))
$$;

create function _strata_pgmq_build.send_batch(queue_name text, msgs jsonb[], delay timestamptz) returns setof bigint
language sql as $$ select * from pgmq.send_batch(queue_name, msgs, null, delay) $$;

create function _strata_pgmq_build.send_batch(queue_name text, msgs jsonb[], headers jsonb[], delay integer)
returns setof bigint language sql as $$
  select * from pgmq.send_batch(queue_name, msgs, headers, pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => delay))
$$;

---------------------------------------------------------------------------------------------------------
-- Reading
---------------------------------------------------------------------------------------------------------

-- Up to `qty` visible messages (those matching `conditional`, when given), oldest first, each hidden for
-- `vt` seconds and its read count raised; rows another reader holds are skipped.
create function _strata_pgmq_build.read(queue_name text, vt integer, qty integer, conditional jsonb default '{}')
returns setof _strata_pgmq_build.message_record language plpgsql as $$
declare
  qtable text := pgmq.format_table_name(queue_name, 'q');
begin
  return query execute pg_catalog.format(
    'with cte as (
       select msg_id from pgmq.%1$I
        where vt <= pg_catalog.clock_timestamp() and ($3 = ''{}''::jsonb or message @> $3)
        order by msg_id asc
        limit $1
        for update skip locked)
     update pgmq.%1$I m
        set vt = pg_catalog.clock_timestamp() + $2, read_ct = read_ct + 1
       from cte
      where m.msg_id = cte.msg_id
     returning m.msg_id, m.read_ct, m.enqueued_at, m.vt, m.message, m.headers',
    qtable) using qty, pg_catalog.make_interval(secs => vt), coalesce(conditional, '{}'::jsonb);
end
$$;

-- read, waiting up to max_poll_seconds (checking every poll_interval_ms) for a message to become visible.
create function _strata_pgmq_build.read_with_poll(
  queue_name text,
  vt integer,
  qty integer,
  max_poll_seconds integer default 5,
  poll_interval_ms integer default 100,
  conditional jsonb default '{}'
) returns setof _strata_pgmq_build.message_record language plpgsql as $$
declare
  stop_at timestamptz := pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => max_poll_seconds);
  r pgmq.message_record;
  got boolean;
begin
  loop
    got := false;
    for r in select * from pgmq.read(queue_name, vt, qty, conditional) loop
      got := true;
      return next r;
    end loop;
    if got or pg_catalog.clock_timestamp() >= stop_at then
      return;
    end if;
    perform pg_catalog.pg_sleep(poll_interval_ms::numeric / 1000);
  end loop;
end
$$;

-- Takes the oldest visible message out of the queue.
create function _strata_pgmq_build.pop(queue_name text) returns setof _strata_pgmq_build.message_record
language plpgsql as $$
begin
  return query execute pg_catalog.format(
    'with cte as (
       select msg_id from pgmq.%1$I
        where vt <= pg_catalog.clock_timestamp()
        order by msg_id asc
        limit 1
        for update skip locked)
     delete from pgmq.%1$I
      where msg_id = (select msg_id from cte)
     returning msg_id, read_ct, enqueued_at, vt, message, headers',
    pgmq.format_table_name(queue_name, 'q'));
end
$$;

-- Hides (or shows) a message until `vt` seconds from now.
create function _strata_pgmq_build.set_vt(queue_name text, msg_id bigint, vt integer)
returns setof _strata_pgmq_build.message_record language plpgsql as $$
begin
  return query execute pg_catalog.format(
    'update pgmq.%I set vt = pg_catalog.clock_timestamp() + $2 where msg_id = $1
     returning msg_id, read_ct, enqueued_at, vt, message, headers',
    pgmq.format_table_name(queue_name, 'q')) using msg_id, pg_catalog.make_interval(secs => vt);
end
$$;

---------------------------------------------------------------------------------------------------------
-- Archiving and deleting
---------------------------------------------------------------------------------------------------------

create function _strata_pgmq_build.archive(queue_name text, msg_ids bigint[]) returns setof bigint
language plpgsql as $$
begin
  return query execute pg_catalog.format(
    'with archived as (
       delete from pgmq.%I where msg_id = any($1)
       returning msg_id, vt, read_ct, enqueued_at, message, headers)
     insert into pgmq.%I (msg_id, vt, read_ct, enqueued_at, message, headers)
     select msg_id, vt, read_ct, enqueued_at, message, headers from archived
     returning msg_id',
    pgmq.format_table_name(queue_name, 'q'), pgmq.format_table_name(queue_name, 'a')) using msg_ids;
end
$$;

create function _strata_pgmq_build.archive(queue_name text, msg_id bigint) returns boolean
language sql as $$ select exists (select from pgmq.archive(queue_name, array[msg_id])) $$;

create function _strata_pgmq_build.delete(queue_name text, msg_ids bigint[]) returns setof bigint
language plpgsql as $$
begin
  return query execute pg_catalog.format('delete from pgmq.%I where msg_id = any($1) returning msg_id',
    pgmq.format_table_name(queue_name, 'q')) using msg_ids;
end
$$;

create function _strata_pgmq_build.delete(queue_name text, msg_id bigint) returns boolean
language sql as $$ select exists (select from pgmq.delete(queue_name, array[msg_id])) $$;

-- Empties a queue; answers how many messages it held.
create function _strata_pgmq_build.purge_queue(queue_name text) returns bigint
language plpgsql as $$
declare
  qtable text := pgmq.format_table_name(queue_name, 'q');
  n bigint;
begin
  execute pg_catalog.format('select count(*) from pgmq.%I', qtable) into n;
  execute pg_catalog.format('truncate table pgmq.%I', qtable);
  return n;
end
$$;

---------------------------------------------------------------------------------------------------------
-- Listing and metrics
---------------------------------------------------------------------------------------------------------

create function _strata_pgmq_build.list_queues() returns setof _strata_pgmq_build.queue_record
language sql stable as $$
  select queue_name, is_partitioned, is_unlogged, created_at from pgmq.meta
$$;

create function _strata_pgmq_build.metrics(queue_name text) returns _strata_pgmq_build.metrics_result
language plpgsql as $$
declare
  qtable text := pgmq.format_table_name(queue_name, 'q');
  result pgmq.metrics_result;
begin
  execute pg_catalog.format(
    'select $1, count(*),
            extract(epoch from (now() - max(enqueued_at)))::int,
            extract(epoch from (now() - min(enqueued_at)))::int,
            (select case when is_called then last_value else 0 end from %s),
            now(),
            count(*) filter (where vt <= now())
       from pgmq.%I',
    pg_catalog.pg_get_serial_sequence(pg_catalog.format('pgmq.%I', qtable), 'msg_id'), qtable)
    into result using queue_name;
  return result;
end
$$;

create function _strata_pgmq_build.metrics_all() returns setof _strata_pgmq_build.metrics_result
language sql as $$
  select (pgmq.metrics(m.queue_name)).* from pgmq.meta m
$$;

---------------------------------------------------------------------------------------------------------
-- Privileges, then the schema takes its name
---------------------------------------------------------------------------------------------------------

-- As the extension: pg_monitor may look; the API roles get nothing until queues are exposed (741).
grant usage on schema _strata_pgmq_build to pg_monitor;
grant select on _strata_pgmq_build.meta to pg_monitor;

do $$
begin
  if exists (select from pg_catalog.pg_namespace where nspname = 'pgmq') then
    drop schema _strata_pgmq_build cascade;
  else
    alter schema _strata_pgmq_build rename to pgmq;
  end if;
end
$$;
