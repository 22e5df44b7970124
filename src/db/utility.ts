import type pg from "pg";

/**
 * Runs a utility statement (CREATE/ALTER/DROP ..., GRANT), which takes no bound parameters: the values are
 * bound to PostgreSQL's `format()`, which quotes them (`%I` an identifier, `%L` a literal) on the server,
 * and the statement it returns runs. The template is always a constant of the code.
 */
export async function runUtilityStatement(
  client: pg.ClientBase,
  template: string,
  values: readonly string[],
): Promise<void> {
  const { rows } = await client.query<{ statement: string }>(
    // pg_catalog's format: a tenant's `format(text, variadic text[])` would match the call better.
    "select pg_catalog.format($1, variadic $2::text[]) as statement",
    [template, values],
  );
  await client.query(rows[0].statement);
}
