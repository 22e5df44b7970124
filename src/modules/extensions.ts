import type pg from "pg";

/**
 * The extensions behind the database modules, as SQL written for the platform enables them: its docs and
 * migrations start with `create extension pg_net with schema extensions` (pg_cron, pgmq, supabase_vault alike).
 * Every project has these modules already, built by Strata (sql/project/710-741). On the clusters Strata runs,
 * PostgreSQL has an extension of each name that records the module as enabled and creates nothing
 * (src/db/installation.ts), which the owner may create: the statement goes to PostgreSQL as written, as a client
 * of the database listener's does. Where the cluster has no such extension the owner may create (a DATABASE_URL
 * cluster), PostgreSQL would refuse it: in the owner's SQL that Strata runs (the SQL endpoint, migrations, a
 * branch's replay) each one, whole as a statement, becomes a `do` block that only says so. A database where the
 * extension is installed keeps the statement as written.
 */

const MODULE_EXTENSIONS = "pg_cron|pg_net|pgmq|supabase_vault";
const IDENT = String.raw`(?:"[^"]*"|[a-z_][a-z0-9_$]*)`;
/** A statement of its own (after the start, a `;` and any blanks or `--` comments) up to its `;` or the end. */
const CREATE_EXTENSION = new RegExp(
  String.raw`(^|;)((?:\s|--[^\n]*\n)*)create\s+extension\s+(?:if\s+not\s+exists\s+)?("?)(${MODULE_EXTENSIONS})\3` +
    String.raw`(?:\s+with)?(?:\s+schema\s+${IDENT})?(?:\s+version\s+(?:'[^']*'|${IDENT}|[0-9.]+))?(?:\s+cascade)?` +
    String.raw`\s*(?=;|$)`,
  "gi",
);

/** `sql` with its statements that create a module's extension the owner may not create made into notices. */
export async function withBuiltInExtensions(client: pg.ClientBase, sql: string): Promise<string> {
  if (!sql.match(CREATE_EXTENSION)) return sql;
  const { rows } = await client.query<{ name: string }>(
    `select extname as name from pg_catalog.pg_extension
     union select name from pg_catalog.pg_available_extension_versions where trusted`,
  );
  const creatable = new Set(rows.map((r) => r.name));
  return sql.replace(CREATE_EXTENSION, (statement, start: string, lead: string, _quote, name: string) =>
    creatable.has(name.toLowerCase())
      ? statement
      : `${start}${lead}do $strata_module$ begin raise notice 'extension "${name.toLowerCase()}" is built into ` +
        `this project: nothing to create'; end $strata_module$`,
  );
}
