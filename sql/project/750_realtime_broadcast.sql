-- Broadcast from the database, as the platform has it: realtime.send(payload, event, topic, private) stores
-- a message in realtime.messages, and realtime.broadcast_changes(...) sends a changed row from a trigger.
-- Both run as their caller (security invoker), so the caller's rights on realtime.messages (its grants and
-- RLS insert policies; a trigger function that is security definer runs as its owner, who owns the table)
-- decide whether a message is stored; a refused one only raises a warning, as on the platform.
--
-- Delivery: a stored message is announced with NOTIFY on `strata_realtime` (the channel the Strata nodes of
-- the installation share), at commit and only if the transaction commits; every node hands it to the
-- topic's subscribers on its own sockets as a broadcast `{type, event, payload, meta: {id}}`. A message too
-- large for NOTIFY is announced by id and read back as the project's owner. Private messages reach only the
-- private channel of the topic, whose subscribers the RLS policies on realtime.messages admitted.
-- Messages are kept 72 hours, as on the platform, then pruned by Strata (src/realtime/database.ts).

create or replace function realtime.send(payload jsonb, event text, topic text, private boolean default true)
returns void language plpgsql as $$
declare
  generated_id uuid;
  final_payload jsonb;
  announcement text;
begin
  begin
    generated_id := pg_catalog.gen_random_uuid();
    -- The payload carries the message's id unless it has one.
    if payload ? 'id' then
      final_payload := payload;
    else
      final_payload := pg_catalog.jsonb_set(payload, '{id}', pg_catalog.to_jsonb(generated_id));
    end if;
    -- Insert policies see the topic through realtime.topic().
    perform pg_catalog.set_config('realtime.topic', topic, true);
    insert into realtime.messages (id, payload, event, topic, private, extension)
    values (generated_id, final_payload, event, topic, private, 'broadcast');
    announcement := pg_catalog.jsonb_build_object('db', pg_catalog.jsonb_build_object(
      'id', generated_id, 'topic', topic, 'event', event, 'private', coalesce(private, false),
      'payload', final_payload))::text;
    if pg_catalog.octet_length(announcement) >= 7900 then
      announcement := pg_catalog.jsonb_build_object('db', pg_catalog.jsonb_build_object('id', generated_id))::text;
    end if;
    perform pg_catalog.pg_notify('strata_realtime', announcement);
  exception
    when others then
      raise warning 'WarnSendingBroadcastMessage: %', sqlerrm;
  end;
end
$$;

-- For a row trigger: sends {old_record, record, operation, table, schema} as `event_name` to `topic_name`
-- (private).
create or replace function realtime.broadcast_changes(
  topic_name text,
  event_name text,
  operation text,
  table_name text,
  table_schema text,
  new record,
  old record,
  level text default 'ROW'
) returns void language plpgsql as $$
declare
  row_data jsonb := '{}'::jsonb;
begin
  if level = 'STATEMENT' then
    raise exception 'function can only be triggered for each row, not for each statement';
  end if;
  if operation in ('INSERT', 'UPDATE', 'DELETE') then
    row_data := pg_catalog.jsonb_build_object('old_record', old, 'record', new, 'operation', operation,
      'table', table_name, 'schema', table_schema);
    perform realtime.send(row_data, event_name, topic_name);
  else
    raise exception 'Unexpected operation type: %', operation;
  end if;
exception
  when others then
    raise exception 'Failed to process the row: %', sqlerrm;
end
$$;

grant execute on function realtime.send(jsonb, text, text, boolean) to anon, authenticated, service_role;
grant execute on function realtime.broadcast_changes(text, text, text, text, text, record, record, text)
  to anon, authenticated, service_role;

-- Pruning by age reads an index. The owner may have changed the table: only a table whose inserted_at is
-- still the built-in timestamp gets it (an index build runs the column type's comparisons).
do $$
begin
  if (select c.relkind in ('r', 'p') from pg_catalog.pg_class c where c.oid = pg_catalog.to_regclass('realtime.messages'))
     and (select a.atttypid = 'pg_catalog.timestamp'::pg_catalog.regtype from pg_catalog.pg_attribute a
           where a.attrelid = 'realtime.messages'::pg_catalog.regclass and a.attname = 'inserted_at' and not a.attisdropped)
  then
    create index if not exists messages_inserted_at_idx on realtime.messages (inserted_at);
  end if;
end
$$;
