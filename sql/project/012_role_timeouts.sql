-- The platform's statement timeouts of anon and authenticated (3 s, 8 s), as the platform writes them. Strata's
-- data requests apply these defaults themselves (src/catalog/roleSettings.ts): the roles are shared by every
-- project of the cluster and any of them may change their settings, so Strata does not read them back.
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
