import { SafeError } from "grafast";

/**
 * An error whose message is part of pg_graphql's API and reaches the client verbatim
 * (grafast passes SafeError messages through error masking).
 */
export class PgGqlError extends SafeError {
  constructor(message: string) {
    super(message);
  }
}
