-- Requests as anon or authenticated end after the platform's statement timeouts (3 s, 8 s), so a slow or
-- hostile query cannot hold the data connections; a project changes them with `alter role ... set`.
-- Roles are cluster-wide: only set them when no value is there yet.
do $$
begin
  if not exists (select from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
                 where r.rolname = 'anon' and s.setdatabase = 0) then
    alter role anon set statement_timeout = '3s';
  end if;
  if not exists (select from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
                 where r.rolname = 'authenticated' and s.setdatabase = 0) then
    alter role authenticated set statement_timeout = '8s';
  end if;
end
$$;
