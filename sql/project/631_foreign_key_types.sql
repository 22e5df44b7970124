-- A foreign key's check runs as the owner of the referenced table (PostgreSQL's RI triggers switch to it), and a
-- key whose column type differs from the referenced one is compared through an implicit cast, which may be a
-- function of the tenant's (`create cast (my_enum as uuid) with function ... as implicit` on a type it owns).
-- The owner may reference auth's tables, which a superuser owns: such a key would run the tenant's cast as a
-- superuser on every insert, in every branch copy and restore. So a foreign key to a table a superuser owns may
-- not compare a type of the tenant's with another: its column has the referenced column's type, a domain over
-- it, or a type the tenant does not own (whose casts to the referenced type are not the tenant's either).

create or replace function _strata.check_foreign_key_types() returns event_trigger
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  bad record;
begin
  for bad in
    select k.conname, k.conrelid::regclass as tbl, k.confrelid::regclass as referenced
      from pg_event_trigger_ddl_commands() c
      join pg_constraint k on k.conrelid = c.objid and k.contype = 'f'
      join pg_class pk on pk.oid = k.confrelid
     where c.classid = 'pg_class'::regclass
       and (select rolsuper from pg_roles where oid = pk.relowner)
       and exists (
         select from unnest(k.conkey, k.confkey) as p(fk_col, pk_col)
           join pg_attribute fa on fa.attrelid = k.conrelid and fa.attnum = p.fk_col
           join pg_attribute pa on pa.attrelid = k.confrelid and pa.attnum = p.pk_col
           join lateral (
             -- the column's type under any domains
             with recursive d(oid, base) as (
               select t.oid, t.typbasetype from pg_type t where t.oid = fa.atttypid
               union all
               select t.oid, t.typbasetype from pg_type t join d on t.oid = d.base where d.base <> 0
             ) select d.oid from d where d.base = 0) b on true
           join pg_type ft on ft.oid = b.oid
          where ft.oid <> pa.atttypid and not (select rolsuper from pg_roles where oid = ft.typowner))
  loop
    raise exception 'foreign key % of % compares a type of its own with the column it references in %',
      bad.conname, bad.tbl, bad.referenced
      using errcode = '42804', hint = 'Give the column the referenced column''s type (or a domain over it).';
  end loop;
end
$$;

drop event trigger if exists strata_foreign_key_types;
create event trigger strata_foreign_key_types on ddl_command_end when tag in ('CREATE TABLE', 'ALTER TABLE')
  execute function _strata.check_foreign_key_types();
