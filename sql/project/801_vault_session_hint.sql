-- 730's vault._session_key with its hint brought up to date: the data API's sessions (765) and the owner's
-- through the database listener decrypt too, not only the sessions Strata opens for the owner.
do $outer$
begin
  -- Strata's vault only (730 made it: its session functions are there).
  if to_regprocedure('vault._strata_session_open()') is null then
    return;
  end if;
  create or replace function vault._session_key() returns bytea
  language plpgsql stable security definer set search_path = pg_catalog, pg_temp as $$
  declare
    keys bytea[];
  begin
    if not exists (select from pg_class c
                    where c.relnamespace = pg_my_temp_schema() and c.relname = 'strata_vault_session'
                      and c.relkind = 'r' and c.relowner = 'strata_vault'::regrole) then
      raise exception 'vault: this session cannot decrypt secrets' using errcode = '42501',
        hint = 'Strata decrypts vault.decrypted_secrets in the sessions it opens: the SQL editor and database/query, migrations, cron jobs, the data API''s, and the owner''s through the database listener.';
    end if;
    execute 'select array_agg(key) from pg_temp.strata_vault_session' into keys;
    if cardinality(keys) is distinct from 1 then
      raise exception 'vault: this session''s key was not loaded' using errcode = '42501';
    end if;
    return keys[1];
  end
  $$;
end
$outer$;
