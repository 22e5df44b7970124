import { isSafeError, SafeError } from "grafast";
import { GraphQLError, type ExecutionResult } from "grafast/graphql";

/**
 * An error whose message is part of pg_graphql's API and reaches the client verbatim
 * (grafast passes SafeError messages through error masking).
 */
export class PgGqlError extends SafeError {
  constructor(message: string) {
    super(message);
  }
}

/** pg_graphql's request errors that come without a `data` key (operation selection, fragment cycles, limits). */
export class RequestError extends GraphQLError {}

/** What a client sees of an error, by the error it stands for (read by servers: `pgGqlOriginalError`). */
const originals = new WeakMap<GraphQLError, unknown>();

/** The error an answered error stands for (a database error, an internal one), if any. */
export function pgGqlOriginalError(error: GraphQLError): unknown {
  return originals.get(error);
}

/** A database error (from `pg`): its message is part of what pg_graphql returns. */
function isDatabaseError(error: unknown): boolean {
  return (
    error instanceof Error &&
    typeof (error as { code?: unknown }).code === "string" &&
    typeof (error as { severity?: unknown }).severity === "string"
  );
}

/** Called with an error whose message the client does not see. */
export type InternalErrorListener = (error: Error) => void;

/**
 * An error as pg_graphql answers it: its message only (no locations, path or extensions). `SafeError`s
 * (PgGqlError) and database errors keep their message; anything else is reported to `onInternal` and answered
 * "Internal server error".
 */
function answered(error: GraphQLError, onInternal: InternalErrorListener): GraphQLError {
  const original = error.originalError;
  let message = error.message;
  if (original && !isSafeError(original) && !isDatabaseError(original)) {
    // A role without any mutation (no insert/update/delete privilege) has no Mutation type.
    if (/No mutation type found in schema/.test(original.message)) {
      message = "Schema is not configured for mutations";
    } else {
      onInternal(original);
      message = "Internal server error";
    }
  }
  const shown = new (error instanceof RequestError ? RequestError : GraphQLError)(message);
  if (original) originals.set(shown, original);
  return shown;
}

/** After a failed statement the rest of the request's transaction only repeats that it is aborted. */
function isAbortedTransaction(error: GraphQLError): boolean {
  return (error.originalError as { code?: unknown } | undefined)?.code === "25P02";
}

const toConsole: InternalErrorListener = (error) => console.error("pg_graphql request failed", error);

/**
 * A failed request as pg_graphql answers it, as a whole: `{"data": null, "errors": [...]}` (no partial data),
 * without `data` when any error is a RequestError.
 */
export function pgGqlErrors(
  errors: readonly GraphQLError[],
  onInternal: InternalErrorListener = toConsole,
): ExecutionResult {
  const reported = errors.filter((e) => !isAbortedTransaction(e));
  const shown = (reported.length ? reported : errors).map((e) => answered(e, onInternal));
  return shown.some((e) => e instanceof RequestError) ? { errors: shown } : { data: null, errors: shown };
}
