-- The platform's unified log stream, as the MCP server's query_logs teaches agents to read it (ClickHouse
-- dialect): one `logs` view of every source of the project, a `source` column naming it, and the event's
-- fields flattened into `log_attributes` with dotted keys (`log_attributes['request.method']`,
-- `log_attributes['response.status_code']`). Built over the per-source views (901, 911), so it shows the
-- same project and time range; strata_log_reader reads it and nothing more.
create or replace view logs.logs with (security_barrier) as
  select e.id, e.timestamp, e.event_message, e.source, upper(e.metadata ->> 'level') as severity_text,
         a.log_attributes, e.metadata
    from (
      select id, timestamp, event_message, 'edge_logs' as source, metadata from logs.edge_logs
      union all
      select id, timestamp, event_message, 'auth_logs', metadata from logs.auth_logs
      union all
      select id, timestamp, event_message, 'postgres_logs', metadata from logs.postgres_logs
      union all
      select id, timestamp, event_message, 'function_logs', metadata from logs.function_logs
      union all
      select id, timestamp, event_message, 'function_edge_logs', metadata from logs.function_edge_logs
    ) e
    cross join lateral (
      with recursive walk (key, value) as (
        select f.key, f.value from jsonb_each(e.metadata) f
        union all
        select w.key || '.' || f.key, f.value
          from walk w
         cross join lateral jsonb_each(case when jsonb_typeof(w.value) = 'object' then w.value else '{}' end) f
      )
      select coalesce(jsonb_object_agg(key, value) filter (where jsonb_typeof(value) <> 'object'), '{}')
               as log_attributes
        from walk
    ) a;

grant select on logs.logs to strata_log_reader;
