-- A custom hostname is first a project's request: several projects may ask for the same name, each with a
-- TXT token of its own, and none learns of the others. The name becomes a project's only once its DNS
-- records verify for that project (4_origin_setup_completed, then 5_services_reconfigured when served); a
-- vanity subdomain is the project's at once. So a row is the project's (one per kind), and a name is unique
-- among the claimed rows only.
do $$
begin
  if exists (select from pg_constraint c join pg_attribute a on a.attrelid = c.conrelid and a.attnum = any (c.conkey)
              where c.conrelid = 'platform.project_hostnames'::regclass and c.contype = 'p' and a.attname = 'hostname') then
    alter table platform.project_hostnames drop constraint project_hostnames_pkey;
    alter table platform.project_hostnames drop constraint if exists project_hostnames_project_ref_kind_key;
    alter table platform.project_hostnames add constraint project_hostnames_pkey primary key (project_ref, kind);
  end if;
end $$;

create unique index if not exists project_hostnames_claimed on platform.project_hostnames (hostname)
  where kind = 'vanity' or status in ('4_origin_setup_completed', '5_services_reconfigured');
