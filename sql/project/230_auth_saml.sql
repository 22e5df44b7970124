-- SAML single sign-on, in the platform auth server's shape: users created through an SSO provider
-- (is_sso_user) may share an address with another user, so the address is unique only among the others;
-- a relay state ties an identity provider's answer to the sign-in that asked for it (one use).
alter table auth.users drop constraint if exists users_email_key;
create unique index if not exists users_email_partial_key on auth.users (email) where is_sso_user = false;

create table if not exists auth.saml_relay_states (
  id uuid primary key,
  sso_provider_id uuid not null,
  request_id text not null,
  for_email text,
  redirect_to text,
  flow_state_id uuid references auth.flow_state on delete cascade,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index if not exists saml_relay_states_created_at_idx on auth.saml_relay_states (created_at desc);

-- The SSO provider a session was signed in through.
alter table auth.sessions add column if not exists sso_provider_id uuid;

revoke all on auth.saml_relay_states from anon, authenticated, service_role;
