/**
 * The one catalogue of REST errors: PostgREST's codes, messages and HTTP statuses, and the mapping of
 * PostgreSQL's SQLSTATEs to statuses. Every non-2xx answer of /rest/v1 is a RestError's body.
 */
export class RestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: string | null = null,
    readonly hint: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  body(): { code: string; details: string | null; hint: string | null; message: string } {
    return { code: this.code, details: this.details, hint: this.hint, message: this.message };
  }
}

export const errors = {
  /** A query-string parameter that does not parse; `column` is 1-based, as PostgREST reports it. */
  parse: (what: string, input: string, column: number, details: string) =>
    new RestError(
      400,
      "PGRST100",
      `"failed to parse ${what} (${input})" (line 1, column ${column})`,
      details,
    ),
  invalidBody: (message: string) => new RestError(400, "PGRST102", message),
  invalidRange: (details: string | null, headers: Record<string, string> = {}) =>
    new RestError(416, "PGRST103", "Requested range not satisfiable", details, null, headers),
  unacceptableSchema: (schema: string, exposed: string[]) =>
    new RestError(
      406,
      "PGRST106",
      `Invalid schema: ${schema}`,
      null,
      `Only the following schemas are exposed: ${exposed.join(", ")}`,
    ),
  unacceptableMedia: (accept: string) =>
    new RestError(406, "PGRST107", `None of these media types are available: ${accept}`),
  singular: (rows: number) =>
    new RestError(
      406,
      "PGRST116",
      "Cannot coerce the result to a single JSON object",
      `The result contains ${rows} rows`,
    ),
  noRelationship: (parent: string, child: string, schema: string) =>
    new RestError(
      400,
      "PGRST200",
      `Could not find a relationship between '${parent}' and '${child}' in the schema cache`,
      `Searched for a foreign key relationship between '${parent}' and '${child}' in the schema '${schema}', but no matches were found.`,
    ),
  ambiguousRelationship: (parent: string, child: string, details: unknown, hint: string) =>
    new RestError(
      300,
      "PGRST201",
      `Could not embed because more than one relationship was found for '${parent}' and '${child}'`,
      details as string,
      hint,
    ),
  noFunction: (schema: string, name: string, args: string[]) =>
    new RestError(
      404,
      "PGRST202",
      `Could not find the function ${schema}.${name}${args.length ? `(${args.join(", ")})` : " without parameters"} in the schema cache`,
      `Searched for the function ${schema}.${name}${args.length ? ` with parameters ${args.join(", ")}` : " without parameters"} or with a single unnamed json/jsonb parameter, but no matches were found in the schema cache.`,
    ),
  ambiguousFunction: (schema: string, name: string) =>
    new RestError(300, "PGRST203", `Could not choose the best candidate function between: ${schema}.${name}`),
  unknownColumn: (column: string, table: string) =>
    new RestError(400, "PGRST204", `Could not find the '${column}' column of '${table}' in the schema cache`),
  noTable: (schema: string, table: string) =>
    new RestError(404, "PGRST205", `Could not find the table '${schema}.${table}' in the schema cache`),
  notInsertable: (table: string) => new RestError(405, "PGRST205", `Cannot insert into '${table}'`),
};

/** Status for a PostgreSQL error, as PostgREST maps it (Error.hs). */
function statusOfSqlState(code: string, anonymous: boolean): number {
  if (code === "42501") return anonymous ? 401 : 403;
  if (code === "23505" || code === "23503") return 409;
  if (code === "42P01" || code === "42883") return 404;
  if (code === "25006") return 405;
  if (code === "21000") return 500;
  if (code === "P0001") return 400;
  if (/^PT\d{3}$/.test(code)) return Number(code.slice(2));
  if (code.startsWith("08") || code.startsWith("53") || code === "57P01") return 503;
  if (/^(22|23|42|2F|P0|XX|0L|0P|28)/.test(code)) return code.startsWith("28") ? 403 : 400;
  if (code.startsWith("40")) return 500;
  return 500;
}

interface PgError {
  code?: string;
  message: string;
  detail?: string;
  hint?: string;
}

/** A database error as PostgREST answers it: SQLSTATE, message, detail and hint passed through. */
export function fromPgError(e: PgError, anonymous: boolean): RestError {
  const code = e.code ?? "XX000";
  const status = statusOfSqlState(code, anonymous);
  const headers: Record<string, string> = status === 401 ? { "WWW-Authenticate": "Bearer" } : {};
  return new RestError(status, code, e.message, e.detail ?? null, e.hint ?? null, headers);
}
