-- Queues for the Data API: the `pgmq_public` schema and grants that the platform's "Expose Queues via
-- PostgREST" switch creates (send, send_batch, read, pop, archive, delete over pgmq, each running as its
-- caller with an empty search_path), so supabase-js reaches them with schema('pgmq_public').rpc(...) once the
-- project's exposed schemas include pgmq_public (PATCH /v1/projects/{ref}/postgrest, db_schema), the switch's
-- second step. service_role may use every queue; anon and authenticated may call the functions, and a queue's
-- own grants and row level security decide what they may do with it.
--
-- A project that already has a pgmq_public schema keeps it as it is, and so does one whose pgmq is neither
-- Strata's (740) nor the extension.
do $outer$
declare
  fn text;
begin
  if exists (select from pg_catalog.pg_namespace where nspname = 'pgmq_public')
     or not (pg_catalog.to_regclass('pgmq._partitions') is not null
             or exists (select from pg_catalog.pg_extension where extname = 'pgmq')) then
    return;
  end if;
  create schema pgmq_public;
  execute $ddl$
    create function pgmq_public.pop(queue_name text) returns setof pgmq.message_record
    language plpgsql set search_path = '' as $$
    begin
      return query select * from pgmq.pop(queue_name := queue_name);
    end
    $$;
    comment on function pgmq_public.pop(text) is
      'Retrieves and locks the next message from the specified queue.';

    create function pgmq_public.send(queue_name text, message jsonb, sleep_seconds integer default 0)
    returns setof bigint language plpgsql set search_path = '' as $$
    begin
      return query select * from pgmq.send(queue_name := queue_name, msg := message, delay := sleep_seconds);
    end
    $$;
    comment on function pgmq_public.send(text, jsonb, integer) is
      'Sends a message to the specified queue, optionally delaying its availability by a number of seconds.';

    create function pgmq_public.send_batch(queue_name text, messages jsonb[], sleep_seconds integer default 0)
    returns setof bigint language plpgsql set search_path = '' as $$
    begin
      return query select * from pgmq.send_batch(queue_name := queue_name, msgs := messages, delay := sleep_seconds);
    end
    $$;
    comment on function pgmq_public.send_batch(text, jsonb[], integer) is
      'Sends a batch of messages to the specified queue, optionally delaying their availability by a number of seconds.';

    create function pgmq_public.archive(queue_name text, message_id bigint) returns boolean
    language plpgsql set search_path = '' as $$
    begin
      return pgmq.archive(queue_name := queue_name, msg_id := message_id);
    end
    $$;
    comment on function pgmq_public.archive(text, bigint) is
      'Archives a message by moving it from the queue to a permanent archive.';

    create function pgmq_public.delete(queue_name text, message_id bigint) returns boolean
    language plpgsql set search_path = '' as $$
    begin
      return pgmq.delete(queue_name := queue_name, msg_id := message_id);
    end
    $$;
    comment on function pgmq_public.delete(text, bigint) is
      'Permanently deletes a message from the specified queue.';

    create function pgmq_public.read(queue_name text, sleep_seconds integer, n integer)
    returns setof pgmq.message_record language plpgsql set search_path = '' as $$
    begin
      return query select * from pgmq.read(queue_name := queue_name, vt := sleep_seconds, qty := n);
    end
    $$;
    comment on function pgmq_public.read(text, integer, integer) is
      'Reads up to "n" messages from the specified queue with an optional "sleep_seconds" (visibility timeout).';

    grant usage on schema pgmq_public to anon, authenticated, service_role;
    grant execute on all functions in schema pgmq_public to anon, authenticated, service_role;
  $ddl$;

  -- The queue functions behind them (whichever pgmq signatures this database has), the schema, and the
  -- queue list for service_role; the queues' tables get their grants as each is made (740).
  grant usage on schema pgmq to anon, authenticated, service_role;
  foreach fn in array array['pgmq.pop(text)', 'pgmq.send(text, jsonb, integer)', 'pgmq.send_batch(text, jsonb[], integer)',
    'pgmq.archive(text, bigint)', 'pgmq.delete(text, bigint)', 'pgmq.read(text, integer, integer)',
    'pgmq.read(text, integer, integer, jsonb)']
  loop
    if pg_catalog.to_regprocedure(fn) is not null then
      execute pg_catalog.format('grant execute on function %s to anon, authenticated, service_role',
        pg_catalog.to_regprocedure(fn));
    end if;
  end loop;
  grant all on table pgmq.meta to service_role;
end
$outer$;
