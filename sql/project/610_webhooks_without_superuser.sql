-- Database webhooks without superuser rights (replaces 600's installer). The trigger function turns the
-- changed row into JSON with to_jsonb(), which calls a tenant's own casts to json(b) and whatever those
-- call; it used to run them as the superuser that installed it. Now two roles without powers do the work:
--   strata_webhook_trigger  owns supabase_functions.http_request() (security definer): it may only queue a
--                           request (insert into http_request_queue and hooks, their sequences) and notify;
--   strata_webhook_sender   what Strata's dispatcher switches to: it reads and clears the queue and records
--                           the answers in http_responses.
-- Nobody logs in as either, and no project role is a member of either. Roles are cluster-wide; the grants
-- are this database's. The schema and its tables are Strata's: never handed to the project's owner (who
-- could attach triggers to them), readable by the project through service_role.

do $$
begin
  if not exists (select from pg_roles where rolname = 'strata_webhook_trigger') then
    create role strata_webhook_trigger nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'strata_webhook_sender') then
    create role strata_webhook_sender nologin noinherit;
  end if;
end
$$;
alter role strata_webhook_trigger nologin nosuperuser nocreatedb nocreaterole noreplication nobypassrls noinherit;
alter role strata_webhook_sender nologin nosuperuser nocreatedb nocreaterole noreplication nobypassrls noinherit;

-- supabase_functions joins Strata's own schemas, so _strata.ensure_project_roles no longer gives it to the
-- project's owner at the next start.
create or replace function _strata.is_internal_schema(name text) returns boolean
language sql immutable set search_path = pg_catalog, pg_temp as $$
  select name like 'pg\_%' or name in ('information_schema', 'platform', '_strata', '_strata_graphql',
    'strata_migrations', 'supabase_functions')
$$;

create or replace function _strata.enable_webhooks() returns void
language plpgsql set search_path = pg_catalog, pg_temp as $fn$
declare
  obj record;
begin
  create schema if not exists supabase_functions;

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

  -- What each request got back (or why it failed or was refused), kept for inspection like pg_net's
  -- _http_response.
  create table if not exists supabase_functions.http_responses (
    id bigint primary key,
    status_code integer,
    content_type text,
    content text,
    error_msg text,
    attempts integer not null,
    created timestamptz not null default now()
  );

  -- Taken back where an earlier version let the project's owner have them, with every grant it made.
  execute format('alter schema supabase_functions owner to %I', current_user);
  for obj in select unnest(array['hooks', 'http_request_queue', 'http_responses']) as name loop
    execute format('alter table supabase_functions.%I owner to %I', obj.name, current_user);
  end loop;
  for obj in
    select 'schema' as kind, n.nspname::text as name, a.grantee
      from pg_namespace n cross join lateral aclexplode(n.nspacl) a
     where n.nspname = 'supabase_functions' and a.grantee <> n.nspowner
    union
    select case c.relkind when 'S' then 'sequence' else 'table' end, c.oid::regclass::text, a.grantee
      from pg_class c cross join lateral aclexplode(c.relacl) a
     where c.relnamespace = 'supabase_functions'::regnamespace and c.relkind in ('r', 'p', 'S')
       and a.grantee <> c.relowner
  loop
    execute format('revoke all on %s %s from %s', obj.kind, obj.name,
      case when obj.grantee = 0 then 'public' else quote_ident(pg_get_userbyid(obj.grantee)) end);
  end loop;
  -- What an owner could have attached to them meanwhile runs when Strata writes there: triggers, rules,
  -- policies, column defaults, constraints, index expressions and extra columns are put back as made above.
  for obj in
    select c.oid::regclass::text as tab, t.tgname::text as name, 'trigger' as kind
      from pg_trigger t join pg_class c on c.oid = t.tgrelid
     where c.relnamespace = 'supabase_functions'::regnamespace and not t.tgisinternal
    union all
    select c.oid::regclass::text, r.rulename::text, 'rule'
      from pg_rewrite r join pg_class c on c.oid = r.ev_class
     where c.relnamespace = 'supabase_functions'::regnamespace and c.relkind = 'r'
    union all
    select c.oid::regclass::text, p.polname::text, 'policy'
      from pg_policy p join pg_class c on c.oid = p.polrelid
     where c.relnamespace = 'supabase_functions'::regnamespace
    union all
    select c.oid::regclass::text, k.conname::text, 'constraint'
      from pg_constraint k join pg_class c on c.oid = k.conrelid
     where c.relnamespace = 'supabase_functions'::regnamespace and k.contype <> 'p'
  loop
    if obj.kind = 'constraint' then
      execute format('alter table %s drop constraint %I', obj.tab, obj.name);
    else
      execute format('drop %s %I on %s', obj.kind, obj.name, obj.tab);
    end if;
  end loop;
  for obj in
    select i.indexrelid::regclass::text as name
      from pg_index i join pg_class c on c.oid = i.indrelid
     where c.relnamespace = 'supabase_functions'::regnamespace and not i.indisprimary
  loop
    execute format('drop index %s', obj.name);
  end loop;
  for obj in
    select c.oid::regclass::text as tab, a.attname::text as col,
           (c.relname, a.attname) in (('hooks', 'id'), ('hooks', 'hook_table_id'), ('hooks', 'hook_name'),
             ('hooks', 'created_at'), ('hooks', 'request_id'), ('http_request_queue', 'id'),
             ('http_request_queue', 'method'), ('http_request_queue', 'url'), ('http_request_queue', 'headers'),
             ('http_request_queue', 'params'), ('http_request_queue', 'body'), ('http_request_queue', 'timeout_ms'),
             ('http_request_queue', 'attempts'), ('http_request_queue', 'next_attempt_at'),
             ('http_request_queue', 'created_at'), ('http_responses', 'id'), ('http_responses', 'status_code'),
             ('http_responses', 'content_type'), ('http_responses', 'content'), ('http_responses', 'error_msg'),
             ('http_responses', 'attempts'), ('http_responses', 'created')) as known
      from pg_attribute a join pg_class c on c.oid = a.attrelid
     where c.relnamespace = 'supabase_functions'::regnamespace and c.relkind = 'r' and a.attnum > 0
       and not a.attisdropped
  loop
    if obj.known then
      execute format('alter table %s alter column %I drop default', obj.tab, obj.col);
    else
      execute format('alter table %s drop column %I', obj.tab, obj.col);
    end if;
  end loop;
  alter table supabase_functions.hooks disable row level security, no force row level security;
  alter table supabase_functions.http_request_queue disable row level security, no force row level security;
  alter table supabase_functions.http_responses disable row level security, no force row level security;
  alter table supabase_functions.hooks alter column id set default nextval('supabase_functions.hooks_id_seq'),
    alter column created_at set default now();
  alter table supabase_functions.http_request_queue
    alter column id set default nextval('supabase_functions.http_request_queue_id_seq'),
    alter column headers set default '{}', alter column params set default '{}',
    alter column timeout_ms set default 1000, alter column attempts set default 0,
    alter column next_attempt_at set default now(), alter column created_at set default now(),
    add constraint http_request_queue_method_check check (method in ('GET', 'POST'));
  alter table supabase_functions.http_responses alter column created set default now();
  create index supabase_functions_hooks_request_id_idx on supabase_functions.hooks (request_id);
  create index supabase_functions_hooks_h_table_id_h_name_idx on supabase_functions.hooks (hook_table_id, hook_name);

  grant usage on schema supabase_functions to anon, authenticated, service_role, strata_webhook_trigger,
    strata_webhook_sender;
  grant insert on supabase_functions.http_request_queue, supabase_functions.hooks to strata_webhook_trigger;
  grant usage on sequence supabase_functions.http_request_queue_id_seq, supabase_functions.hooks_id_seq
    to strata_webhook_trigger;
  grant select, update, delete on supabase_functions.http_request_queue to strata_webhook_sender;
  grant select, insert, update on supabase_functions.http_responses to strata_webhook_sender;
  grant select on supabase_functions.hooks, supabase_functions.http_request_queue,
    supabase_functions.http_responses to service_role;

  create or replace function supabase_functions.http_request() returns trigger
  language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
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
    -- The id first, so the insert needs no right to read the queue back.
    request_id := nextval('supabase_functions.http_request_queue_id_seq');
    insert into supabase_functions.http_request_queue (id, method, url, headers, params, body, timeout_ms)
      values (request_id, method, url, headers, params, case when method = 'POST' then payload end, timeout_ms);
    insert into supabase_functions.hooks (hook_table_id, hook_name, request_id)
      values (TG_RELID, TG_NAME, request_id);
    perform pg_notify('strata_webhooks', request_id::text);
    return coalesce(NEW, OLD);
  end
  $$;
  alter function supabase_functions.http_request() owner to strata_webhook_trigger;
  revoke all on function supabase_functions.http_request() from public;
  grant execute on function supabase_functions.http_request() to anon, authenticated, service_role;
end
$fn$;
revoke all on function _strata.enable_webhooks() from public;

-- A database that enabled webhooks before: its trigger function, owned by the superuser, is replaced now.
do $$
begin
  if to_regnamespace('supabase_functions') is not null then
    perform _strata.enable_webhooks();
  end if;
end
$$;
