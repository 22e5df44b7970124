-- Strata's own tables out of the platform's tools' sight. The platform's CLI (`inspect db table-stats`,
-- `index-stats`, `vacuum-stats`, `bloat`, ...) and its linter (`db advisors`: unused_index, no_primary_key, ...)
-- skip fixed lists of the platform's schema names and report every other table as the user's. The one schema of
-- Strata's own that every such list skips is `extensions`, where the platform keeps the machinery its image
-- installs in every database (its event trigger functions) and where Strata's database modules live. Strata's
-- tables move there, named for what they are:
--   _strata.bootstrap (src/db/bootstrap.ts)            -> extensions.strata_bootstrap
--   _strata.realtime_nodes, _presences, _relay (510)   -> extensions.strata_realtime_nodes, ...
--   _strata_load.session_keys (630)                    -> extensions.strata_load_session_keys
--   _strata.pg_stat_statements_row (735, a row type)   -> extensions.pg_stat_statements_row
-- Each old name stays as a view of the same rows (a simple view: reads, inserts, updates and deletes pass through to
-- the table, with its defaults), so what names them keeps working (src/db/bootstrap.ts, which also serves the
-- control plane's database, and 630's functions), and the view keeps no grant (the table had none but the
-- superuser's). Realtime's code names the tables themselves (it reads xmax, which a view has not).
-- ALTER ... SET SCHEMA keeps every dependency (indexes, the relay's sequence, 735's function's return type) and
-- every privilege.
--
-- The owner may create in `extensions`: a name there that the owner took first (a relation, an index, a type) is
-- not Strata's and goes, as 630 does with a schema of its name, so that every name Strata uses there is its own.
-- The indexes and the relay's sequence move with their table, renamed with its prefix first.
create or replace function _strata.free_name_in_extensions(wanted text) returns void
language plpgsql set search_path = pg_catalog, pg_temp as $$
declare
  taken record;
begin
  for taken in
    select c.relkind, (select rolsuper from pg_roles where oid = c.relowner) as strata
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'extensions' and c.relname = wanted
  loop
    if taken.strata then
      raise exception 'extensions.% is taken by a superuser', wanted;
    end if;
    execute format('drop %s if exists extensions.%I cascade',
      case taken.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'S' then 'sequence'
        when 'i' then 'index' when 'I' then 'index' when 'f' then 'foreign table' when 'c' then 'type'
        else 'table' end, wanted);
  end loop;
  if exists (select from pg_type t join pg_namespace n on n.oid = t.typnamespace
              where n.nspname = 'extensions' and t.typname = wanted and t.typrelid = 0
                and not (select rolsuper from pg_roles where oid = t.typowner)) then
    execute format('drop type extensions.%I cascade', wanted);
  end if;
end
$$;
revoke all on function _strata.free_name_in_extensions(text) from public;

do $$
declare
  move record;
  rel regclass;
  part record;
begin
  for move in
    select * from (values ('_strata', 'bootstrap', 'strata_bootstrap'),
                          ('_strata', 'realtime_nodes', 'strata_realtime_nodes'),
                          ('_strata', 'realtime_presences', 'strata_realtime_presences'),
                          ('_strata', 'realtime_relay', 'strata_realtime_relay'),
                          ('_strata_load', 'session_keys', 'strata_load_session_keys'),
                          ('_strata', 'pg_stat_statements_row', 'pg_stat_statements_row')) as m(schema, name, target)
  loop
    select c.oid into rel from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = move.schema and c.relname = move.name and c.relkind = 'r';
    if rel is null then
      continue;
    end if;
    if move.target <> move.name then
      execute format('alter table %s rename to %I', rel, move.target);
    end if;
    perform _strata.free_name_in_extensions(move.target);
    for part in
      select c.relname, c.relkind from pg_class c
       where c.oid in (select indexrelid from pg_index where indrelid = rel
                       union select objid from pg_depend where refobjid = rel and classid = 'pg_class'::regclass
                                                             and deptype = 'a')
         and c.relkind in ('i', 'S')
    loop
      perform _strata.free_name_in_extensions('strata_' || part.relname);
      execute format('alter %s %I.%I rename to %I', case part.relkind when 'S' then 'sequence' else 'index' end,
        move.schema, part.relname, 'strata_' || part.relname);
    end loop;
    execute format('alter table %s set schema extensions', rel);
    -- 735's function returns rows of the type; nothing reads that table itself.
    if move.name <> 'pg_stat_statements_row' then
      execute format('create view %I.%I as select * from extensions.%I', move.schema, move.name, move.target);
      execute format('revoke all on %I.%I from public', move.schema, move.name);
    end if;
  end loop;
end
$$;
drop function _strata.free_name_in_extensions(text);
