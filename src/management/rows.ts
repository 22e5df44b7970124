import type pg from "pg";

/** The rows of one statement of Strata's, its values bound: the stores' reads. */

type Queryable = pg.Pool | pg.ClientBase;

export async function allRows<T extends pg.QueryResultRow = any>(
  db: Queryable,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  return (await db.query<T>(text, values)).rows;
}

/** The statement's first row (undefined: none). */
export async function firstRow<T extends pg.QueryResultRow = any>(
  db: Queryable,
  text: string,
  values: unknown[] = [],
): Promise<T | undefined> {
  return (await db.query<T>(text, values)).rows[0];
}

/** The row of a statement that answers exactly one (an insert's `returning`, an aggregate). */
export async function oneRow<T extends pg.QueryResultRow = any>(
  db: Queryable,
  text: string,
  values: unknown[] = [],
): Promise<T> {
  return (await db.query<T>(text, values)).rows[0];
}
