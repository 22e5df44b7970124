-- Realtime, as the platform keeps it in every project database:
--   the publication `supabase_realtime`, empty: a table's changes are streamed to postgres_changes
--   subscribers once it is added (`alter publication supabase_realtime add table public.messages`);
--   `realtime.messages`, whose RLS policies authorise private channels: joining a private channel reads a
--   probe row (extension 'broadcast' or 'presence') as the subscriber's role, sending inserts one, with
--   `realtime.topic()` naming the channel. No policy exists by default, so private channels are closed.
do $$
begin
  if not exists (select from pg_publication where pubname = 'supabase_realtime') then
    create publication supabase_realtime;
  end if;
end
$$;

create schema if not exists realtime;

create table if not exists realtime.messages (
  id uuid primary key default gen_random_uuid(),
  topic text not null,
  extension text not null,
  payload jsonb,
  event text,
  private boolean default false,
  updated_at timestamp without time zone not null default now(),
  inserted_at timestamp without time zone not null default now()
);
alter table realtime.messages enable row level security;

-- The topic of the channel being authorised (set locally by Strata while it checks a join or a send).
create or replace function realtime.topic() returns text
language sql stable as $$
  select nullif(current_setting('realtime.topic', true), '')::text
$$;

grant usage on schema realtime to anon, authenticated, service_role;
grant select, insert, update on realtime.messages to anon, authenticated, service_role;
grant execute on function realtime.topic() to anon, authenticated, service_role;
