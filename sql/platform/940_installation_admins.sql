-- The installation's administrators: the operator's users, the only callers who may act on what every project
-- of a cluster shares (ALTER SYSTEM, restarts, physical backups, replicas). The bootstrap admin is one (set at
-- every start, src/platform/firstStart.ts); every other user is not, unless the operator sets it here.
alter table platform.users add column if not exists is_installation_admin boolean not null default false;
