-- More of the platform's log sources, beside edge_logs and function_logs (901_logs.sql): auth events
-- (auth_logs, recorded by the auth service), the project's Postgres log lines (postgres_logs, read from the
-- log of a cluster Strata runs) and edge function invocations as edge requests (function_edge_logs). Each
-- shows one project's events in the query's time range, and strata_log_reader reads them and nothing else.
create or replace view logs.auth_logs with (security_barrier) as
  select id, timestamp, event_message, metadata
    from platform.log_events
   where source = 'auth_logs'
     and project_ref = current_setting('strata.log_ref')
     and timestamp >= current_setting('strata.log_start')::timestamptz
     and timestamp < current_setting('strata.log_end')::timestamptz;

create or replace view logs.postgres_logs with (security_barrier) as
  select id, timestamp, event_message, metadata
    from platform.log_events
   where source = 'postgres_logs'
     and project_ref = current_setting('strata.log_ref')
     and timestamp >= current_setting('strata.log_start')::timestamptz
     and timestamp < current_setting('strata.log_end')::timestamptz;

create or replace view logs.function_edge_logs with (security_barrier) as
  select id, created_at as timestamp, method || ' | ' || status || ' | ' || path as event_message,
         jsonb_build_object(
           'function_id', function_id, 'slug', slug, 'version', version,
           'request', jsonb_build_object('method', method, 'path', path),
           'response', jsonb_build_object('status_code', status),
           'execution_time_ms', duration_ms) as metadata
    from platform.function_logs
   where kind = 'invocation'
     and project_ref = current_setting('strata.log_ref')
     and created_at >= current_setting('strata.log_start')::timestamptz
     and created_at < current_setting('strata.log_end')::timestamptz;

grant select on logs.auth_logs, logs.postgres_logs, logs.function_edge_logs to strata_log_reader;
