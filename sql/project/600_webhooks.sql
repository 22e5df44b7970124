-- Database webhooks, as the platform's `supabase_functions.http_request` trigger: a row change queues an HTTP
-- request that Strata's webhook dispatcher sends (with retries) and records. Installed by
-- POST /v1/projects/{ref}/database/webhooks/enable through _strata.enable_webhooks().
create or replace function _strata.enable_webhooks() returns void language plpgsql as $fn$
begin
  create schema if not exists supabase_functions;
  grant usage on schema supabase_functions to anon, authenticated, service_role;

  -- One row per fired hook, as on the platform (request_id names the queued request).
  create table if not exists supabase_functions.hooks (
    id bigserial primary key,
    hook_table_id integer not null,
    hook_name text not null,
    created_at timestamptz not null default now(),
    request_id bigint
  );
  create index if not exists supabase_functions_hooks_request_id_idx on supabase_functions.hooks (request_id);
  create index if not exists supabase_functions_hooks_h_table_id_h_name_idx
    on supabase_functions.hooks (hook_table_id, hook_name);

  -- Requests waiting to be sent; the dispatcher claims them with `for update skip locked`, so several Strata
  -- nodes share the queue without sending a request twice.
  create table if not exists supabase_functions.http_request_queue (
    id bigserial primary key,
    method text not null check (method in ('GET', 'POST')),
    url text not null,
    headers jsonb not null default '{}',
    params jsonb not null default '{}',
    body jsonb,
    timeout_ms integer not null default 1000,
    attempts integer not null default 0,
    next_attempt_at timestamptz not null default now(),
    created_at timestamptz not null default now()
  );

  -- What each request got back (or why it failed), kept for inspection like pg_net's _http_response.
  create table if not exists supabase_functions.http_responses (
    id bigint primary key,
    status_code integer,
    content_type text,
    content text,
    error_msg text,
    attempts integer not null,
    created timestamptz not null default now()
  );

  create or replace function supabase_functions.http_request() returns trigger
  language plpgsql security definer set search_path = supabase_functions, pg_temp as $$
  declare
    request_id bigint;
    payload jsonb;
    url text := TG_ARGV[0]::text;
    method text := upper(coalesce(TG_ARGV[1]::text, 'POST'));
    headers jsonb := coalesce(nullif(TG_ARGV[2]::text, ''), '{}')::jsonb;
    params jsonb := coalesce(nullif(TG_ARGV[3]::text, ''), '{}')::jsonb;
    timeout_ms integer := coalesce(nullif(TG_ARGV[4]::text, ''), '1000')::integer;
  begin
    if url is null or url = 'null' then
      raise exception 'url argument is missing';
    end if;
    if method not in ('GET', 'POST') then
      raise exception 'method argument % is invalid', method;
    end if;
    payload := jsonb_build_object(
      'old_record', case when TG_OP in ('UPDATE', 'DELETE') then to_jsonb(OLD) end,
      'record', case when TG_OP in ('INSERT', 'UPDATE') then to_jsonb(NEW) end,
      'type', TG_OP,
      'table', TG_TABLE_NAME,
      'schema', TG_TABLE_SCHEMA
    );
    insert into supabase_functions.http_request_queue (method, url, headers, params, body, timeout_ms)
      values (method, url, headers, params, case when method = 'POST' then payload end, timeout_ms)
      returning id into request_id;
    insert into supabase_functions.hooks (hook_table_id, hook_name, request_id)
      values (TG_RELID, TG_NAME, request_id);
    perform pg_notify('strata_webhooks', request_id::text);
    return coalesce(NEW, OLD);
  end
  $$;
  revoke all on function supabase_functions.http_request() from public;
  grant execute on function supabase_functions.http_request() to anon, authenticated, service_role;
end
$fn$;
revoke all on function _strata.enable_webhooks() from public;
