-- The request tokens of OAuth 1.0a sign-ins (Twitter): the token's secret signs the access token request,
-- so it stays on the server from /authorize to /callback, bound to the sign-in's state and used once.
create table if not exists auth.oauth1_request_tokens (
  token text primary key,
  secret text not null,
  provider_type text not null,
  state_id uuid not null,
  created_at timestamptz not null default now()
);

revoke all on auth.oauth1_request_tokens from public;
do $$ begin
  if exists (select from pg_roles where rolname = 'anon') then
    revoke all on auth.oauth1_request_tokens from anon, authenticated, service_role;
  end if;
  if exists (select from pg_roles where rolname = 'supabase_auth_admin') then
    grant select, insert, update, delete on auth.oauth1_request_tokens to supabase_auth_admin;
  end if;
end $$;
