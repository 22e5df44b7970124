import type { ExecutionResult } from "grafast/graphql";
import { pgGqlErrors } from "./pgGqlErrors";

/**
 * pg_graphql answers a failed request as a whole and only with messages: an operation that met any error answers
 * `{"data": null, "errors": [{"message": ...}]}`, no partial data, no locations or paths. A PgGqlError's or a
 * database error's message is shown; any other error is reported to `pgGraphql.onInternalError` and answered
 * "Internal server error" (see pgGqlErrors.ts).
 */
export const PgGqlErrorsPlugin: GraphileConfig.Plugin = {
  name: "PgGqlErrorsPlugin",
  description: "pg_graphql's error answers: no partial data, messages only, internal errors masked",
  version: "0.1.0",
  // Inside the document rules' answer (which adds refused introspection beside data), outside the transaction's.
  after: ["PgGqlDocumentPlugin"],
  grafast: {
    middleware: {
      async execute(next, event) {
        const result = await next();
        if (Symbol.asyncIterator in result) return result;
        const { errors } = result as ExecutionResult;
        if (!errors?.length) return result;
        return pgGqlErrors(errors, event.args.resolvedPreset?.pgGraphql?.onInternalError);
      },
    },
  },
};
