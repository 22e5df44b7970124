-- Realtime across Strata nodes (several processes on one installation's database):
--   realtime_nodes: each node's heartbeat and socket count; a node silent longer than the timeout is dead;
--   realtime_presences: every tracked presence, by node, so a joiner on any node gets the whole state and a
--     dead node's presences can be removed (and left) by the survivors;
--   realtime_relay: a cross-node message too large for pg_notify's 8000 bytes, fetched by id.
-- Unlogged: the state is as short-lived as the sockets, and writes no WAL for the replication slots to decode.
create unlogged table if not exists _strata.realtime_nodes (
  node text primary key,
  seen_at timestamptz not null default now(),
  connections int not null default 0
);

create unlogged table if not exists _strata.realtime_presences (
  session text primary key,
  node text not null,
  topic text not null,
  key text not null,
  meta jsonb not null
);
create index if not exists realtime_presences_topic on _strata.realtime_presences (topic);
create index if not exists realtime_presences_node on _strata.realtime_presences (node);

create unlogged table if not exists _strata.realtime_relay (
  id bigserial primary key,
  payload text not null,
  created_at timestamptz not null default now()
);
