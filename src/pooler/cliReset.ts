import { createHash } from "node:crypto";

/**
 * The platform CLI's reset: `supabase db reset --linked` and `migration down` (which share it) empty the database
 * with one DO block (its pkg/migration/queries/drop.sql; 2.117.0 runs it from its TypeScript part) before they
 * apply the local migrations again. That block drops every schema not excluded by name and not owned by a role
 * named `supabase_admin` (the platform's own), every extension but a few, public's functions, views, tables,
 * sequences and types, truncates the tables of `auth`, `supabase_functions` and `supabase_migrations`, and drops
 * every policy and publication of the database. On Strata the project's owner runs it, and Strata's schemas
 * (auth, cron, net, `_strata`, ...) are not the owner's, nor are cron's tables and their policies: the first of
 * them fails the block whole (`must be owner of schema …`), and storage and realtime, which are the owner's,
 * would go with the user's schemas.
 *
 * So the database listener recognises that exact statement (its bytes, by length and SHA-256) and sends
 * `STRATA_RESET` in its place, in the same session, as the same role: the same steps, limited to what is the
 * user's, as the platform's ownership limits them. Nothing runs with more rights than the client's own.
 */
const CLI_RESETS = [
  { cli: "2.117.0", bytes: 5127, sha256: "1d36119dd0632298c23a95773f9947f148d31deb0f67d21e748bda5dd8bf1b70" },
];

/** The byte lengths of the statements `isCliReset` recognises (the listener holds messages of these sizes). */
export const CLI_RESET_LENGTHS = CLI_RESETS.map((r) => r.bytes);

/** Whether `text` is one of the CLI's reset statements, byte for byte. */
export function isCliReset(text: string): boolean {
  const bytes = Buffer.from(text, "utf8");
  const known = CLI_RESETS.filter((r) => r.bytes === bytes.length);
  if (known.length === 0) return false;
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  return known.some((r) => r.sha256 === sha256);
}

/**
 * The CLI's reset, step for step, on the user's objects only: what the session's role may drop (its own, or a
 * role's it is a member of), never an extension's member, never a schema of the platform's (the CLI's list) or of
 * Strata's, which on the platform would be `supabase_admin`'s and stay (auth, storage, realtime, the database
 * modules' cron, net, vault, pgmq and pgmq_public, Strata's machinery). Of the tables the CLI truncates, those the
 * role may truncate are emptied (the migration history, `supabase_migrations`); auth's rows are Strata's auth
 * service's, which the owner may read but not write, and stay. Policies and publications go where the role owns
 * their table or publication (the user's storage and realtime policies too, which the migrations make again).
 */
export const STRATA_RESET = `do $strata_reset$
declare
  rec record;
begin
  for rec in
    select n.nspname from pg_catalog.pg_namespace n
     where not exists (select from pg_catalog.pg_depend d
                        where d.classid = 'pg_catalog.pg_namespace'::pg_catalog.regclass and d.objid = n.oid)
       and not n.nspname like any (array['information\\_schema', 'pg\\_%', '\\_analytics', '\\_realtime', '\\_supavisor',
         'pgbouncer', 'pgmq', 'pgsodium', 'pgtle', 'supabase\\_migrations', 'vault', 'extensions', 'public',
         'auth', 'storage', 'realtime', 'supabase\\_functions', 'graphql', 'graphql\\_public', 'cron', 'net',
         'pgmq\\_public', 'platform', '\\_strata%', 'strata\\_migrations'])
       and pg_catalog.pg_has_role(n.nspowner, 'USAGE')
  loop
    raise notice 'dropping schema: %', rec.nspname;
    execute pg_catalog.format('drop schema if exists %I cascade', rec.nspname);
  end loop;

  for rec in
    select e.extname from pg_catalog.pg_extension e
     where e.extname not in ('pg_graphql', 'pg_net', 'pg_stat_statements', 'pgcrypto', 'pgjwt', 'pgsodium', 'plpgsql',
                             'supabase_vault', 'uuid-ossp')
       and pg_catalog.pg_has_role(e.extowner, 'USAGE')
  loop
    raise notice 'dropping extension: %', rec.extname;
    execute pg_catalog.format('drop extension if exists %I cascade', rec.extname);
  end loop;

  for rec in
    select p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid) as args from pg_catalog.pg_proc p
     where p.pronamespace = 'public'::pg_catalog.regnamespace and pg_catalog.pg_has_role(p.proowner, 'USAGE')
       and not exists (select from pg_catalog.pg_depend d
                        where d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass and d.objid = p.oid and d.deptype = 'e')
  loop
    raise notice 'dropping function: public.%', rec.proname;
    execute pg_catalog.format('drop routine if exists public.%I(%s) cascade', rec.proname, rec.args);
  end loop;

  -- Views, materialized views, then tables (all table-like relations), then sequences, as the CLI orders them.
  for rec in
    select c.relname, c.relkind from pg_catalog.pg_class c
     where c.relnamespace = 'public'::pg_catalog.regnamespace and c.relkind not in ('c', 'S', 'i', 'I')
       and pg_catalog.pg_has_role(c.relowner, 'USAGE')
       and not exists (select from pg_catalog.pg_depend d
                        where d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass and d.objid = c.oid and d.deptype = 'e')
     order by c.relkind = 'v' desc, c.relkind = 'm' desc, c.relkind desc
  loop
    raise notice 'dropping %: public.%', case rec.relkind when 'v' then 'view' when 'm' then 'materialized view' else 'table' end, rec.relname;
    execute pg_catalog.format('drop %s if exists public.%I cascade',
      case rec.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table' else 'table' end,
      rec.relname);
  end loop;

  for rec in
    select n.nspname, c.relname from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where (n.nspname = 'auth' and c.relname <> 'schema_migrations'
            or n.nspname = 'supabase_functions' and c.relname <> 'migrations'
            or n.nspname = 'supabase_migrations')
       and c.relkind = 'r' and pg_catalog.has_table_privilege(c.oid, 'TRUNCATE')
  loop
    raise notice 'truncating table: %.%', rec.nspname, rec.relname;
    execute pg_catalog.format('truncate %I.%I cascade', rec.nspname, rec.relname);
  end loop;

  for rec in
    select c.relname from pg_catalog.pg_class c
     where c.relnamespace = 'public'::pg_catalog.regnamespace and c.relkind = 'S'
       and pg_catalog.pg_has_role(c.relowner, 'USAGE')
       and not exists (select from pg_catalog.pg_depend d
                        where d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass and d.objid = c.oid and d.deptype in ('e', 'a', 'i'))
  loop
    raise notice 'dropping sequence: public.%', rec.relname;
    execute pg_catalog.format('drop sequence if exists public.%I cascade', rec.relname);
  end loop;

  for rec in
    select t.typname from pg_catalog.pg_type t
     where t.typnamespace = 'public'::pg_catalog.regnamespace and t.typtype <> 'b'
       and pg_catalog.pg_has_role(t.typowner, 'USAGE')
       and (t.typrelid = 0 or (select c.relkind from pg_catalog.pg_class c where c.oid = t.typrelid) = 'c')
       and not exists (select from pg_catalog.pg_depend d
                        where d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass and d.objid = t.oid
                          and d.deptype in ('e', 'i'))
  loop
    raise notice 'dropping type: public.%', rec.typname;
    execute pg_catalog.format('drop type if exists public.%I cascade', rec.typname);
  end loop;

  for rec in
    select p.polname, n.nspname, c.relname from pg_catalog.pg_policy p
      join pg_catalog.pg_class c on c.oid = p.polrelid join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where pg_catalog.pg_has_role(c.relowner, 'USAGE')
  loop
    raise notice 'dropping policy: %', rec.polname;
    execute pg_catalog.format('drop policy if exists %I on %I.%I', rec.polname, rec.nspname, rec.relname);
  end loop;

  for rec in
    select p.pubname from pg_catalog.pg_publication p
     where not p.pubname like any (array['supabase\\_realtime%', 'realtime\\_messages%'])
       and pg_catalog.pg_has_role(p.pubowner, 'USAGE')
  loop
    raise notice 'dropping publication: %', rec.pubname;
    execute pg_catalog.format('drop publication if exists %I', rec.pubname);
  end loop;
end
$strata_reset$`;
