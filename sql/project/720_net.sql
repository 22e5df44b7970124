-- net: pg_net's SQL interface where the pg_net binary is not available (the embedded cluster's case).
-- net.http_get/http_post/http_delete queue a request and answer its id; Strata's net worker
-- (src/jobs/modules/net.ts) takes committed requests from the queue (a rolled-back transaction's never reach it),
-- sends them under the outbound policy and records each answer, or why there is none, in net._http_response,
-- where they stay for six hours (pg_net's default ttl). The worker reads and writes these tables as strata_net.
-- Privileges are the platform's: the API roles and the owner (_strata.grant_modules) use the schema.
--
-- Where the cluster has pg_net loaded for this very database (a DATABASE_URL cluster whose pg_net.database_name
-- names it), the real extension is created instead, and Strata's worker leaves the project to it.

create or replace function _strata.install_net() returns void
language plpgsql set search_path = pg_catalog, pg_temp as $install$
begin
  create schema if not exists net;
  revoke all on schema net from public;

  if to_regtype('net.http_method') is null then
    create domain net.http_method as text check (value ilike 'get' or value ilike 'post' or value ilike 'delete');
  end if;

  create unlogged table if not exists net.http_request_queue (
    id bigserial,
    method net.http_method not null,
    url text not null,
    headers jsonb,
    body bytea,
    timeout_milliseconds integer not null
  );

  create unlogged table if not exists net._http_response (
    id bigint,
    status_code integer,
    content_type text,
    headers jsonb,
    content text,
    timed_out boolean,
    error_msg text,
    created timestamptz not null default now()
  );
  create index if not exists _http_response_created_idx on net._http_response (created);

  if to_regtype('net.request_status') is null then
    create type net.request_status as enum ('PENDING', 'SUCCESS', 'ERROR');
    create type net.http_response as (status_code integer, headers jsonb, body text);
    create type net.http_response_result as (status net.request_status, message text, response net.http_response);
  end if;

  -- curl_easy_escape's encoding: everything but ASCII letters, digits and -._~ as %XX of its UTF-8 bytes.
  create or replace function net._urlencode_string(string varchar) returns text
  language sql immutable set search_path = pg_catalog, pg_temp as $$
    select string_agg(case when c ~ '^[A-Za-z0-9._~-]$' then c
                           else upper(regexp_replace(encode(convert_to(c, 'UTF8'), 'hex'), '(..)', '%\1', 'g')) end,
                      '' order by i)
      from regexp_split_to_table(string, '') with ordinality as t(c, i)
  $$;

  create or replace function net._encode_url_with_params_array(url text, params_array text[]) returns text
  language sql immutable set search_path = pg_catalog, pg_temp as $$
    select case when coalesce(cardinality(params_array), 0) = 0 then url
                else url || case when position('?' in url) > 0 then '&' else '?' end || array_to_string(params_array, '&')
           end
  $$;

  -- The worker is part of every Strata node: these have nothing to check, restart or wait for.
  create or replace function net.check_worker_is_up() returns void language sql as $$ select $$;
  comment on function net.check_worker_is_up()
    is 'raises an exception if the pg_net background worker is not up, otherwise it doesn''t return anything';
  create or replace function net.worker_restart() returns boolean language sql as $$ select true $$;
  create or replace function net.wait_until_running() returns void language sql as $$ select $$;
  comment on function net.wait_until_running() is 'waits until the worker is running';
  create or replace function net.wake() returns void language sql as $$ select $$;

  create or replace function net.http_get(url text, params jsonb default '{}'::jsonb, headers jsonb default '{}'::jsonb,
    timeout_milliseconds integer default 5000) returns bigint
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  declare
    request_id bigint;
    params_array text[];
  begin
    select coalesce(array_agg(net._urlencode_string(key) || '=' || net._urlencode_string(value)), '{}')
      into params_array from jsonb_each_text(params);
    insert into net.http_request_queue (method, url, headers, timeout_milliseconds)
      values ('GET', net._encode_url_with_params_array(url, params_array), headers, timeout_milliseconds)
      returning id into request_id;
    return request_id;
  end
  $$;

  create or replace function net.http_post(url text, body jsonb default '{}'::jsonb, params jsonb default '{}'::jsonb,
    headers jsonb default '{"Content-Type": "application/json"}'::jsonb, timeout_milliseconds integer default 5000)
  returns bigint
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  declare
    request_id bigint;
    params_array text[];
    content_type text;
  begin
    select header_value into content_type
      from jsonb_each_text(coalesce(headers, '{}'::jsonb)) r(header_name, header_value)
     where lower(header_name) = 'content-type' limit 1;
    if content_type is null then
      headers := headers || '{"Content-Type": "application/json"}'::jsonb;
    end if;
    if content_type <> 'application/json' then
      raise exception 'Content-Type header must be "application/json"';
    end if;
    select coalesce(array_agg(net._urlencode_string(key) || '=' || net._urlencode_string(value)), '{}')
      into params_array from jsonb_each_text(params);
    insert into net.http_request_queue (method, url, headers, body, timeout_milliseconds)
      values ('POST', net._encode_url_with_params_array(url, params_array), headers, convert_to(body::text, 'UTF8'),
              timeout_milliseconds)
      returning id into request_id;
    return request_id;
  end
  $$;

  create or replace function net.http_delete(url text, params jsonb default '{}'::jsonb, headers jsonb default '{}'::jsonb,
    timeout_milliseconds integer default 5000, body jsonb default null) returns bigint
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  declare
    request_id bigint;
    params_array text[];
  begin
    select coalesce(array_agg(net._urlencode_string(key) || '=' || net._urlencode_string(value)), '{}')
      into params_array from jsonb_each_text(params);
    insert into net.http_request_queue (method, url, headers, body, timeout_milliseconds)
      values ('DELETE', net._encode_url_with_params_array(url, params_array), headers, convert_to(body::text, 'UTF8'),
              timeout_milliseconds)
      returning id into request_id;
    return request_id;
  end
  $$;

  -- Waits for a request's answer. A request is sent once the transaction that queued it commits.
  create or replace function net._await_response(request_id bigint) returns boolean
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  begin
    while not exists (select from net._http_response r where r.id = request_id) loop
      perform pg_sleep(0.05);
    end loop;
    return true;
  end
  $$;

  create or replace function net._http_collect_response(request_id bigint, async boolean default true)
  returns net.http_response_result
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  declare
    rec net._http_response;
  begin
    if not async then
      perform net._await_response(request_id);
    end if;
    select * into rec from net._http_response r where r.id = request_id;
    if rec is null or rec.error_msg is not null then
      return ('ERROR', coalesce(rec.error_msg, 'request matching request_id not found'), null)::net.http_response_result;
    end if;
    return ('SUCCESS', 'ok', (rec.status_code, rec.headers, rec.content)::net.http_response)::net.http_response_result;
  end
  $$;

  create or replace function net.http_collect_response(request_id bigint, async boolean default true)
  returns net.http_response_result
  language plpgsql set search_path = pg_catalog, pg_temp as $$
  begin
    raise notice 'The net.http_collect_response function is deprecated.';
    return net._http_collect_response(request_id, async);
  end
  $$;

  revoke all on all functions in schema net from public;
  revoke all on all tables in schema net from public;
  revoke all on all sequences in schema net from public;
  grant usage on schema net to anon, authenticated, service_role;
  grant execute on all functions in schema net to anon, authenticated, service_role;
  grant select, insert, update, delete on all tables in schema net to anon, authenticated, service_role;
  grant usage, select on all sequences in schema net to anon, authenticated, service_role;

  grant usage on schema net to strata_net;
  grant select, update, delete on net.http_request_queue to strata_net;
  grant select, insert, delete on net._http_response to strata_net;
end
$install$;
revoke all on function _strata.install_net() from public;

do $$
begin
  if exists (select from pg_available_extensions where name = 'pg_net')
     and 'pg_net' = any(string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','))
     and coalesce(current_setting('pg_net.database_name', true), 'postgres') = current_database() then
    create extension if not exists pg_net;
  else
    perform _strata.install_net();
  end if;
end
$$;
