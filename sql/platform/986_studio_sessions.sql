-- The dashboard's sign-in sessions (src/studio/server/session.ts). The HttpOnly cookie carries a random id and
-- the caller's Management API token encrypted under this row's key: the row alone reveals no token, the cookie
-- alone opens no session, and deleting the row (sign-out, expiry) makes the cookie worthless on every node.
create table if not exists platform.studio_sessions (
  id_hash text primary key,
  token_key bytea not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);

create index if not exists studio_sessions_expires_at on platform.studio_sessions (expires_at);
