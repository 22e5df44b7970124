import { withSnapshotTransaction } from "../../db/transaction";
import type pg from "pg";
import { to as copyTo } from "pg-copy-streams";
import type { Writable } from "node:stream";

/**
 * A project's logical backup, written by Strata from the catalog and `COPY ... TO STDOUT`.
 *
 * Why logical and written here: the embedded PostgreSQL ships only initdb, pg_ctl and postgres, and the
 * system's pg_dump is of an older major version (pg_dump refuses a newer server). Projects share a cluster,
 * so a physical backup (pg_backup_start + WAL) could only bring back the whole cluster, never one project.
 *
 * The file is a plain SQL script (gzip), valid for psql into a fresh Strata project, in three sections as
 * pg_dump orders them: definitions, data, then what is built on data (constraints, indexes, triggers,
 * policies, grants). Every statement is preceded by a `-- strata:<section> <bytes>` line, so Strata's restore
 * reads statements back without parsing SQL; a table's rows follow `-- strata:copy` as COPY text.
 *
 * What it covers: the project's own schemas (public and every schema a user made) with their types (enum,
 * composite, domain), sequences, tables (columns, identity, generated columns, defaults, partitions,
 * unlogged, replica identity), functions and procedures, views, materialized views, constraints, indexes,
 * triggers, RLS and policies, owners, grants, default privileges, comments, realtime publication
 * membership and extensions (the migration history, supabase_migrations, is one of the owner's schemas); of
 * the platform's schemas (auth, storage, realtime, supabase_functions) the rows, triggers and policies; of the
 * database modules, the rows that are the project's (MODULE_TABLES). Not covered: aggregates, operators, casts,
 * rules, foreign tables, event triggers and large objects.
 *
 * Strata's restore applies it as the project's owner (restore.ts), so the dump leaves out what only a
 * superuser could bring back and the tenant never had: owners and default privileges of a superuser (objects
 * an administrator made come back as the owner's, as _strata.ensure_project_roles makes them at every
 * start), grants to superusers, and public's own privileges and comment (the restore keeps the target's).
 *
 * Reading runs no tenant code, though it runs as Strata's superuser: it reads the catalog (pg_get_*def only
 * deparses) and plain tables with `COPY ... TO` (row security bypassed, no triggers, no generated
 * columns computed, each type written by its output function: built in for enums, composites, domains and
 * ranges; a type with functions of its own needs a superuser to make). It selects from no view and calls no
 * cast; materialized views are refreshed by the restore, as the owner.
 */

/** Schemas Strata's bootstrap creates and keeps up to date: their rows, triggers and policies are the user's. */
export const MANAGED_SCHEMAS = ["auth", "storage", "realtime", "supabase_functions"];
/**
 * Schemas that are Strata's machinery (or the control plane, in the default project), and those of the database
 * modules (sql/project/700-739), which every project has and Strata keeps: never dumped.
 */
export const INTERNAL_SCHEMAS = [
  "platform",
  "_strata",
  "_strata_graphql",
  "_strata_load",
  // Empty since its history moved to supabase_migrations (sql/project/790); kept for earlier versions' grants.
  "strata_migrations",
  "information_schema",
  "pg_catalog",
  "cron",
  "net",
  "vault",
  "extensions",
];

/**
 * The database modules' tables whose rows are the project's: its cron jobs and their runs, net's queued
 * requests and answers, vault's secrets (encrypted for the project's own key). Strata's tables, so their rows
 * are loaded by Strata's part of a restore (sql/project/760_module_state.sql); cron's slot bookkeeping
 * (`cron._job_state`, which refers to cron.job) is emptied with them and starts again. The real extensions'
 * tables are theirs, not dumped.
 */
export const MODULE_TABLES = [
  "cron.job",
  "cron.job_run_details",
  "net.http_request_queue",
  "net._http_response",
  "vault.secrets",
];
const EMPTIED_WITH_MODULE_TABLES: Record<string, string> = { "cron.job": "cron._job_state" };

export type Section = "pre" | "post";

export interface DumpProgress {
  (done: number, total: number): void;
}

/** The user's schemas of the connected database (not the platform's, not an extension's). */
export async function userSchemas(client: pg.ClientBase): Promise<string[]> {
  const { rows } = await client.query(
    `select n.nspname from pg_namespace n
      where n.nspname !~ '^pg_' and not (n.nspname = any($1)) and not (n.nspname = any($2))
        and not exists (select from pg_depend d where d.classid = 'pg_namespace'::regclass and d.objid = n.oid
                         and d.deptype = 'e')
      order by n.oid`,
    [MANAGED_SCHEMAS, INTERNAL_SCHEMAS],
  );
  return rows.map((r) => r.nspname);
}

/** Writes `text` as one statement of `section`. */
function statement(out: string[], section: Section, text: string): void {
  const sql = text.trim().replace(/;\s*$/, "") + ";";
  out.push(`-- strata:${section} ${Buffer.byteLength(sql)}\n${sql}\n`);
}

const q = (name: string) => `"${name.replace(/"/g, '""')}"`;
const lit = (value: string) => `'${value.replace(/'/g, "''")}'`;

/** Where each kind of object keeps its ACL, and how its name is cast to an oid. */
const ACL_CATALOG: Record<string, [string, string, string]> = {
  schema: ["pg_namespace", "nspacl", "regnamespace"],
  table: ["pg_class", "relacl", "regclass"],
  sequence: ["pg_class", "relacl", "regclass"],
  function: ["pg_proc", "proacl", "regprocedure"],
  procedure: ["pg_proc", "proacl", "regprocedure"],
  type: ["pg_type", "typacl", "regtype"],
};

/**
 * The grants of an ACL as GRANT statements (the owner's own included, as pg_dump writes them), after a
 * statement that revokes what the object was given at creation (default privileges), so the result is the
 * dumped ACL exactly. An owner that is a superuser gets its own privileges back as `current_user`, the
 * object's owner after the restore; other superusers have every privilege anyway and get no grant (which
 * only a superuser's restore could give).
 */
async function grants(
  client: pg.ClientBase,
  acl: string | null,
  kind: string,
  target: string,
  owner: string,
) {
  if (acl === null) return [] as string[];
  const { rows } = await client.query(
    `select case when a.grantee = 0 then 'public'
                 when r.rolsuper and a.grantee::regrole::text = $2 then 'current_user'
                 else quote_ident(a.grantee::regrole::text) end as grantee,
            a.privilege_type, a.is_grantable
       from aclexplode($1::aclitem[]) a left join pg_roles r on r.oid = a.grantee
      where a.grantee = 0 or not r.rolsuper or a.grantee::regrole::text = $2`,
    [acl, owner],
  );
  const [catalog, column, cast] = ACL_CATALOG[kind];
  const out = [
    `do $strata$ declare g text; begin
  for g in select distinct case when a.grantee = 0 then 'public' else quote_ident(a.grantee::regrole::text) end
             from pg_catalog.${catalog} x, pg_catalog.aclexplode(x.${column}) a where x.oid = ${lit(target)}::${cast}
  loop execute format('revoke all on ${kind} ${target.replace(/'/g, "''").replace(/%/g, "%%")} from %s', g); end loop;
end $strata$`,
  ];
  for (const r of rows) {
    out.push(
      `grant ${r.privilege_type} on ${kind} ${target} to ${r.grantee}${r.is_grantable ? " with grant option" : ""}`,
    );
  }
  return out;
}

/**
 * Writes the dump of the connected database to `sink`. Runs in one repeatable-read read-only transaction,
 * so the catalog and every table's rows come from one snapshot.
 */
export async function writeDump(
  client: pg.ClientBase,
  sink: Writable,
  progress: DumpProgress,
  snapshot: (at: Date) => void = () => {},
): Promise<void> {
  const write = (text: string | Buffer) =>
    new Promise<void>((resolve, reject) => sink.write(text, (e) => (e ? reject(e) : resolve())));
  await withSnapshotTransaction(client, async () => {
    // Names in every pg_get_*def come schema-qualified with an empty search path.
    await client.query("set local search_path = ''");
    // The first query takes the transaction's snapshot: the backup shows the database as it was then.
    snapshot((await client.query("select clock_timestamp() as at")).rows[0].at);
    const schemas = await userSchemas(client);
    const dumped = [...schemas, ...MANAGED_SCHEMAS];
    const pre: string[] = [];
    const post: string[] = [];
    const { rows: superusers } = await client.query(
      "select quote_ident(rolname) as name from pg_roles where rolsuper",
    );
    /** Owners whose objects the restore gives the project's owner (it may not give them back). */
    const notTheTenants = new Set(["pg_database_owner", ...superusers.map((r) => r.name as string)]);
    const setOwner = (object: string, owner: string) => {
      if (!notTheTenants.has(owner)) statement(post, "post", `alter ${object} owner to ${owner}`);
    };
    const { rows: version } = await client.query("show server_version");
    await write(
      `-- Strata logical backup of database ${(await client.query("select current_database() as d")).rows[0].d}` +
        ` (PostgreSQL ${version[0].server_version}), taken ${new Date().toISOString()}.\n` +
        `-- Restore into a fresh Strata project: psql --single-transaction -v ON_ERROR_STOP=1 -f <file>\n` +
        `set check_function_bodies = off;\nset session_replication_role = replica;\nset search_path = '';\n`,
    );

    // Schemas (public too: the restore drops and recreates the user's schemas whole).
    const { rows: nsps } = await client.query(
      `select n.nspname, n.nspowner::regrole::text as owner, n.nspacl::text as acl,
              obj_description(n.oid, 'pg_namespace') as comment
         from pg_namespace n where n.nspname = any($1) order by n.oid`,
      [schemas],
    );
    for (const n of nsps) {
      // public is pg_database_owner's, its privileges and comment Strata's: the restore keeps the target's.
      if (n.owner === "pg_database_owner") continue;
      const authorization = notTheTenants.has(n.owner) ? "" : ` authorization ${n.owner}`;
      statement(pre, "pre", `create schema if not exists ${q(n.nspname)}${authorization}`);
      if (n.comment !== null)
        statement(post, "post", `comment on schema ${q(n.nspname)} is ${lit(n.comment)}`);
      for (const g of await grants(client, n.acl, "schema", q(n.nspname), n.owner))
        statement(post, "post", g);
    }

    // Extensions (an extension in a user schema goes with it when the schema is dropped).
    const { rows: exts } = await client.query(
      `select e.extname, n.nspname from pg_extension e join pg_namespace n on n.oid = e.extnamespace
        where e.extname <> 'plpgsql' order by e.oid`,
    );
    for (const e of exts) {
      statement(pre, "pre", `create extension if not exists ${q(e.extname)} with schema ${q(e.nspname)}`);
    }

    // Objects that belong to an extension are the extension's to create.
    const notExtension = (cls: string, oid: string) =>
      `not exists (select from pg_depend d where d.classid = '${cls}'::regclass and d.objid = ${oid} and d.deptype = 'e')`;

    // Types: enums, composites, domains.
    const { rows: types } = await client.query(
      `select t.oid, t.typtype, t.typname, n.nspname, t.typowner::regrole::text as owner, t.typacl::text as acl,
              format('%I.%I', n.nspname, t.typname) as name, obj_description(t.oid, 'pg_type') as comment,
              format_type(t.typbasetype, t.typtypmod) as base, t.typnotnull, t.typdefault,
              (select array_agg(e.enumlabel::text order by e.enumsortorder) from pg_enum e where e.enumtypid = t.oid) as labels,
              (select array_agg(format('%I %s', a.attname, format_type(a.atttypid, a.atttypmod)) order by a.attnum)
                 from pg_attribute a where a.attrelid = t.typrelid and a.attnum > 0 and not a.attisdropped) as attrs,
              (select array_agg(pg_get_constraintdef(c.oid) order by c.oid) from pg_constraint c where c.contypid = t.oid) as checks
         from pg_type t join pg_namespace n on n.oid = t.typnamespace
        where n.nspname = any($1) and ${notExtension("pg_type", "t.oid")}
          and (t.typtype in ('e', 'd') or (t.typtype = 'c' and (select relkind from pg_class where oid = t.typrelid) = 'c'))
        order by t.oid`,
      [schemas],
    );
    for (const t of types) {
      if (t.typtype === "e") {
        statement(pre, "pre", `create type ${t.name} as enum (${(t.labels ?? []).map(lit).join(", ")})`);
      } else if (t.typtype === "c") {
        statement(pre, "pre", `create type ${t.name} as (${(t.attrs ?? []).join(", ")})`);
      } else {
        statement(
          pre,
          "pre",
          `create domain ${t.name} as ${t.base}${t.typdefault !== null ? ` default ${t.typdefault}` : ""}` +
            `${t.typnotnull ? " not null" : ""}${(t.checks ?? []).map((c: string) => ` ${c}`).join("")}`,
        );
      }
      setOwner(`type ${t.name}`, t.owner);
      if (t.comment !== null) statement(post, "post", `comment on type ${t.name} is ${lit(t.comment)}`);
      for (const g of await grants(client, t.acl, "type", t.name, t.owner)) statement(post, "post", g);
    }

    // Relations of the user's schemas.
    const { rows: rels } = await client.query(
      `select c.oid, c.relkind, c.relpersistence, c.relreplident, c.relrowsecurity, c.relforcerowsecurity,
              format('%I.%I', n.nspname, c.relname) as name, n.nspname, c.relowner::regrole::text as owner,
              c.relacl::text as acl, c.reloptions, obj_description(c.oid, 'pg_class') as comment,
              c.relispartition, pg_get_expr(c.relpartbound, c.oid) as bound,
              case when c.relkind = 'p' then pg_get_partkeydef(c.oid) end as partkey,
              (select format('%I.%I', pn.nspname, pc.relname) from pg_inherits i join pg_class pc on pc.oid = i.inhparent
                 join pg_namespace pn on pn.oid = pc.relnamespace where i.inhrelid = c.oid) as parent,
              case when c.relkind in ('v', 'm') then pg_get_viewdef(c.oid) end as viewdef
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = any($1) and c.relkind in ('r', 'p', 'v', 'm', 'S') and ${notExtension("pg_class", "c.oid")}
        order by c.oid`,
      [schemas],
    );
    const tables = rels.filter((r) => r.relkind === "r" || r.relkind === "p");

    // Sequences that are not an identity column's (those come with their table).
    const { rows: seqs } = await client.query(
      `select format('%I.%I', n.nspname, c.relname) as name, s.seqtypid::regtype::text as type, s.seqstart,
              s.seqincrement, s.seqmax, s.seqmin, s.seqcache, s.seqcycle,
              (select format('%I.%I.%I', tn.nspname, t.relname, a.attname) from pg_depend d
                 join pg_class t on t.oid = d.refobjid join pg_namespace tn on tn.oid = t.relnamespace
                 join pg_attribute a on a.attrelid = d.refobjid and a.attnum = d.refobjsubid
                where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'a') as owned_by,
              exists (select from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'i') as identity
         from pg_class c join pg_namespace n on n.oid = c.relnamespace join pg_sequence s on s.seqrelid = c.oid
        where n.nspname = any($1) and ${notExtension("pg_class", "c.oid")} order by c.oid`,
      [schemas],
    );
    for (const s of seqs.filter((s) => !s.identity)) {
      statement(
        pre,
        "pre",
        `create sequence ${s.name} as ${s.type} increment by ${s.seqincrement} minvalue ${s.seqmin}` +
          ` maxvalue ${s.seqmax} start with ${s.seqstart} cache ${s.seqcache}${s.seqcycle ? " cycle" : " no cycle"}`,
      );
    }

    // Columns of the tables; defaults are set after the functions they may call.
    const { rows: cols } = await client.query(
      `select a.attrelid, a.attname, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull, a.attidentity,
              a.attgenerated, pg_get_expr(d.adbin, d.adrelid) as def, a.attacl::text as acl,
              case when a.attcollation <> t.typcollation then
                (select format('%I.%I', cn.nspname, co.collname) from pg_collation co
                   join pg_namespace cn on cn.oid = co.collnamespace where co.oid = a.attcollation) end as collation,
              col_description(a.attrelid, a.attnum) as comment,
              (select format('sequence name %s start with %s increment by %s minvalue %s maxvalue %s cache %s%s',
                        format('%I.%I', sn.nspname, sc.relname), s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
                        s.seqcache, case when s.seqcycle then ' cycle' else '' end)
                 from pg_depend dp join pg_class sc on sc.oid = dp.objid join pg_namespace sn on sn.oid = sc.relnamespace
                 join pg_sequence s on s.seqrelid = sc.oid
                where dp.refobjid = a.attrelid and dp.refobjsubid = a.attnum and dp.deptype = 'i'
                  and dp.classid = 'pg_class'::regclass) as identity_options
         from pg_attribute a join pg_type t on t.oid = a.atttypid
         left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where a.attrelid = any($1::oid[]) and a.attnum > 0 and not a.attisdropped
        order by a.attrelid, a.attnum`,
      [tables.map((t) => t.oid)],
    );
    const columnsOf = new Map<string, typeof cols>();
    for (const c of cols)
      columnsOf.set(String(c.attrelid), [...(columnsOf.get(String(c.attrelid)) ?? []), c]);

    const defaults: string[] = [];
    for (const t of tables) {
      const columns = columnsOf.get(String(t.oid)) ?? [];
      const options = t.reloptions ? ` with (${t.reloptions.join(", ")})` : "";
      const partition = t.partkey ? ` partition by ${t.partkey}` : "";
      const kind = t.relpersistence === "u" ? "unlogged table" : "table";
      if (t.relispartition) {
        statement(
          pre,
          "pre",
          `create ${kind} ${t.name} partition of ${t.parent} ${t.bound}${partition}${options}`,
        );
      } else {
        const defs = columns.map((c) => {
          let d = `${q(c.attname)} ${c.type}`;
          if (c.collation) d += ` collate ${c.collation}`;
          if (c.attgenerated === "s") d += ` generated always as (${c.def}) stored`;
          if (c.attidentity) {
            d += ` generated ${c.attidentity === "a" ? "always" : "by default"} as identity (${c.identity_options})`;
          }
          if (c.attnotnull && !c.attidentity) d += " not null";
          return d;
        });
        statement(pre, "pre", `create ${kind} ${t.name} (${defs.join(", ")})${partition}${options}`);
      }
      for (const c of columns) {
        if (c.def !== null && !c.attgenerated) {
          defaults.push(`alter table ${t.name} alter column ${q(c.attname)} set default ${c.def}`);
        }
        if (c.comment !== null) {
          statement(post, "post", `comment on column ${t.name}.${q(c.attname)} is ${lit(c.comment)}`);
        }
        if (c.acl !== null) {
          const { rows: colGrants } = await client.query(
            `select case when a.grantee = 0 then 'public' else quote_ident(a.grantee::regrole::text) end as grantee,
                    a.privilege_type from aclexplode($1::aclitem[]) a`,
            [c.acl],
          );
          for (const g of colGrants) {
            statement(
              post,
              "post",
              `grant ${g.privilege_type} (${q(c.attname)}) on table ${t.name} to ${g.grantee}`,
            );
          }
        }
      }
      if (t.relreplident === "f") statement(pre, "pre", `alter table ${t.name} replica identity full`);
    }

    // Functions and procedures (their bodies are not checked at creation: check_function_bodies is off).
    const { rows: fns } = await client.query(
      `select p.oid, pg_get_functiondef(p.oid) as def, p.proowner::regrole::text as owner, p.proacl::text as acl,
              p.prokind, p.oid::regprocedure::text as sig,
              obj_description(p.oid, 'pg_proc') as comment
         from pg_proc p join pg_namespace n on n.oid = p.pronamespace
        where n.nspname = any($1) and p.prokind in ('f', 'p') and ${notExtension("pg_proc", "p.oid")}
        order by p.oid`,
      [schemas],
    );
    for (const f of fns) {
      const kind = f.prokind === "p" ? "procedure" : "function";
      statement(pre, "pre", f.def);
      setOwner(`${kind} ${f.sig}`, f.owner);
      if (f.comment !== null) statement(post, "post", `comment on ${kind} ${f.sig} is ${lit(f.comment)}`);
      for (const g of await grants(client, f.acl, kind, f.sig, f.owner)) statement(post, "post", g);
    }
    for (const d of defaults) statement(pre, "pre", d);

    // Views and materialized views (the restore retries a statement whose dependencies come later).
    for (const v of rels.filter((r) => r.relkind === "v" || r.relkind === "m")) {
      const options = v.reloptions ? ` with (${v.reloptions.join(", ")})` : "";
      if (v.relkind === "v") statement(pre, "pre", `create view ${v.name}${options} as ${v.viewdef}`);
      else {
        statement(
          pre,
          "pre",
          `create materialized view ${v.name}${options} as ${v.viewdef.replace(/;\s*$/, "")} with no data`,
        );
      }
    }
    for (const s of seqs.filter((s) => !s.identity && s.owned_by)) {
      statement(pre, "pre", `alter sequence ${s.name} owned by ${s.owned_by}`);
    }

    // Relations' owners, comments, grants, RLS flags.
    for (const r of rels) {
      const kind =
        r.relkind === "S"
          ? "sequence"
          : r.relkind === "v"
            ? "view"
            : r.relkind === "m"
              ? "materialized view"
              : "table";
      setOwner(`${kind === "materialized view" ? kind : "table"} ${r.name}`, r.owner);
      if (r.comment !== null) statement(post, "post", `comment on ${kind} ${r.name} is ${lit(r.comment)}`);
      const grantKind = r.relkind === "S" ? "sequence" : "table";
      for (const g of await grants(client, r.acl, grantKind, r.name, r.owner)) statement(post, "post", g);
    }

    // What is built on the rows, in the user's and the platform's schemas alike.
    const { rows: allTables } = await client.query(
      `select c.oid, format('%I.%I', n.nspname, c.relname) as name, n.nspname, c.relkind,
              c.relrowsecurity, c.relforcerowsecurity, c.relowner::regrole::text as owner
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = any($1) and c.relkind in ('r', 'p') and ${notExtension("pg_class", "c.oid")}
        order by c.oid`,
      [dumped],
    );
    // A platform table a superuser owns (auth's) keeps the target's triggers, policies and row security.
    const tenantTables = allTables.filter(
      (t) => !(MANAGED_SCHEMAS.includes(t.nspname) && notTheTenants.has(t.owner)),
    );
    const tableOids = tenantTables.map((t) => t.oid);
    const managedTables = allTables.filter((t) => MANAGED_SCHEMAS.includes(t.nspname));
    const { rows: moduleTables } = await client.query(
      `select c.oid, format('%I.%I', n.nspname, c.relname) as name, 'r' as relkind,
              format('%s.%s', n.nspname, c.relname) as plain
         from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where format('%s.%s', n.nspname, c.relname) = any($1) and c.relkind = 'r' and ${notExtension("pg_class", "c.oid")}
        order by c.oid`,
      [MODULE_TABLES],
    );

    // Constraints of the user's tables (the platform's tables keep theirs), foreign keys last.
    const { rows: cons } = await client.query(
      `select format('%I.%I', n.nspname, c.relname) as tbl, k.conname, k.contype, pg_get_constraintdef(k.oid) as def
         from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = any($1) and k.contype in ('p', 'u', 'c', 'x', 'f') and k.conislocal
        order by k.contype = 'f', k.oid`,
      [schemas],
    );
    for (const k of cons) {
      statement(post, "post", `alter table ${k.tbl} add constraint ${q(k.conname)} ${k.def}`);
    }
    const { rows: idx } = await client.query(
      `select pg_get_indexdef(i.indexrelid) as def from pg_index i join pg_class c on c.oid = i.indexrelid
         join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = any($1) and not exists (select from pg_constraint k where k.conindid = i.indexrelid)
          and not exists (select from pg_inherits h where h.inhrelid = i.indexrelid)
        order by i.indexrelid`,
      [schemas],
    );
    for (const i of idx) statement(post, "post", i.def);

    // Triggers and policies of the tenant's tables (on the platform's: those the owner made on storage's).
    const { rows: trgs } = await client.query(
      `select t.tgname, format('%I.%I', n.nspname, c.relname) as tbl, pg_get_triggerdef(t.oid) as def,
              t.tgenabled
         from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
        where t.tgrelid = any($1::oid[]) and not t.tgisinternal and t.tgparentid = 0 order by t.oid`,
      [tableOids],
    );
    const firing: Record<string, string> = { D: "disable", A: "enable always", R: "enable replica" };
    for (const t of trgs) {
      statement(post, "post", `drop trigger if exists ${q(t.tgname)} on ${t.tbl}`);
      statement(post, "post", t.def);
      if (firing[t.tgenabled])
        statement(post, "post", `alter table ${t.tbl} ${firing[t.tgenabled]} trigger ${q(t.tgname)}`);
    }
    const { rows: pols } = await client.query(
      `select format('%I.%I', n.nspname, c.relname) as tbl, p.polname, p.polpermissive,
              case p.polcmd when 'r' then 'select' when 'a' then 'insert' when 'w' then 'update' when 'd' then 'delete' else 'all' end as cmd,
              (select string_agg(case when r = 0 then 'public' else quote_ident(r::regrole::text) end, ', ')
                 from unnest(p.polroles) r) as roles,
              pg_get_expr(p.polqual, p.polrelid) as qual, pg_get_expr(p.polwithcheck, p.polrelid) as check
         from pg_policy p join pg_class c on c.oid = p.polrelid join pg_namespace n on n.oid = c.relnamespace
        where p.polrelid = any($1::oid[]) order by p.oid`,
      [tableOids],
    );
    for (const p of pols) {
      statement(post, "post", `drop policy if exists ${q(p.polname)} on ${p.tbl}`);
      statement(
        post,
        "post",
        `create policy ${q(p.polname)} on ${p.tbl} as ${p.polpermissive ? "permissive" : "restrictive"} for ${p.cmd}` +
          ` to ${p.roles}${p.qual !== null ? ` using (${p.qual})` : ""}${p.check !== null ? ` with check (${p.check})` : ""}`,
      );
    }
    for (const t of tenantTables) {
      statement(
        post,
        "post",
        `alter table ${t.name} ${t.relrowsecurity ? "enable" : "disable"} row level security`,
      );
      statement(
        post,
        "post",
        `alter table ${t.name} ${t.relforcerowsecurity ? "" : "no "}force row level security`,
      );
    }

    // Default privileges in the user's schemas (they go with a dropped schema).
    const { rows: defacls } = await client.query(
      `select d.defaclrole::regrole::text as role, n.nspname, d.defaclobjtype,
              case when a.grantee = 0 then 'public' else quote_ident(a.grantee::regrole::text) end as grantee,
              a.privilege_type, a.is_grantable
         from pg_default_acl d join pg_namespace n on n.oid = d.defaclnamespace, aclexplode(d.defaclacl) a
        where n.nspname = any($1) order by d.oid`,
      [schemas],
    );
    const objtype: Record<string, string> = {
      r: "tables",
      S: "sequences",
      f: "functions",
      T: "types",
      n: "schemas",
    };
    for (const d of defacls.filter((d) => !notTheTenants.has(d.role))) {
      statement(
        post,
        "post",
        `alter default privileges for role ${d.role} in schema ${q(d.nspname)} grant ${d.privilege_type} on ` +
          `${objtype[d.defaclobjtype]} to ${d.grantee}${d.is_grantable ? " with grant option" : ""}`,
      );
    }

    // Realtime's publication membership of the user's tables.
    const { rows: pubs } = await client.query(
      `select p.pubname, format('%I.%I', n.nspname, c.relname) as tbl
         from pg_publication_rel r join pg_publication p on p.oid = r.prpubid join pg_class c on c.oid = r.prrelid
         join pg_namespace n on n.oid = c.relnamespace where n.nspname = any($1) order by r.oid`,
      [schemas],
    );
    for (const p of pubs) statement(post, "post", `alter publication ${q(p.pubname)} add table ${p.tbl}`);
    for (const v of rels.filter((r) => r.relkind === "m"))
      statement(post, "post", `refresh materialized view ${v.name}`);

    // Sequence positions (the modules' tables' sequences too: new ids follow the restored ones).
    const { rows: positions } = await client.query(
      `select format('%I.%I', s.schemaname, s.sequencename) as name, s.last_value, s.start_value
         from pg_sequences s
        where s.schemaname = any($1)
           or format('%I.%I', s.schemaname, s.sequencename)::regclass in (
                select d.objid from pg_depend d where d.classid = 'pg_class'::regclass
                   and d.refclassid = 'pg_class'::regclass and d.refobjid = any($2::oid[]) and d.deptype in ('a', 'i'))`,
      [dumped, moduleTables.map((t) => t.oid)],
    );
    for (const s of positions) {
      statement(
        post,
        "post",
        s.last_value === null
          ? `select pg_catalog.setval(${lit(s.name)}, ${s.start_value}, false)`
          : `select pg_catalog.setval(${lit(s.name)}, ${s.last_value}, true)`,
      );
    }

    await write(pre.join(""));
    // The platform's tables are emptied before their rows are loaded (a fresh project's are empty anyway).
    const loaded = [...allTables.filter((t) => t.relkind === "r"), ...moduleTables];
    const managedNames = [
      ...managedTables.filter((t) => t.relkind === "r").map((t) => t.name),
      ...moduleTables.flatMap((t) => {
        const alongside = EMPTIED_WITH_MODULE_TABLES[t.plain];
        return alongside ? [t.name, alongside.split(".").map(q).join(".")] : [t.name];
      }),
    ];
    if (managedNames.length) {
      const sql = `truncate table ${managedNames.join(", ")}`;
      await write(`-- strata:truncate ${Buffer.byteLength(sql) + 1}\n${sql};\n`);
    }
    let done = 0;
    for (const t of loaded) {
      const { rows: copyCols } = await client.query(
        `select string_agg(quote_ident(attname), ', ' order by attnum) as cols from pg_attribute
          where attrelid = $1 and attnum > 0 and not attisdropped and attgenerated = ''`,
        [t.oid],
      );
      const copy = `copy ${t.name} (${copyCols[0].cols}) from stdin`;
      await write(`-- strata:copy ${Buffer.byteLength(copy) + 1}\n${copy};\n`);
      const stream = client.query(copyTo(`copy ${t.name} (${copyCols[0].cols}) to stdout`));
      for await (const chunk of stream) await write(chunk as Buffer);
      await write("\\.\n");
      progress(++done, loaded.length);
    }
    await write(post.join(""));
    await write("-- strata:end 0\n");
  });
}
