import type { WithPgClient } from "@dataplan/pg";
import type { NodePostgresPgClient } from "@dataplan/pg/adaptors/pg";

/** What Strata's HTTP layer hands to grafast for every request. */
export interface StrataRequestContext {
  /** The role and claims the data gate decided. */
  auth: { role: string; claims: Record<string, unknown> };
  /**
   * How the request's statements reach the database, role, claims and request settings applied (Strata's
   * pipelines, src/graphql/pgClients.ts); PgGqlTransactionPlugin decides the request's transaction.
   */
  withPgClient?: WithPgClient;
}

declare global {
  namespace Grafast {
    interface RequestContext {
      strata?: StrataRequestContext;
    }
  }
}

/** Strata's server splices the data's JSON text into its response as it is: grafast writes it as text. */
const StrataDataAsTextPlugin: GraphileConfig.Plugin = {
  name: "StrataDataAsTextPlugin",
  description: "grafast writes each answer's data as JSON text (outputDataAsString)",
  version: "0.1.0",
  grafast: {
    middleware: {
      prepareArgs(next, event) {
        event.args.outputDataAsString = true;
        return next();
      },
    },
  },
};

/**
 * Server-side settings: every request runs as the role and claims the auth layer decided, applied with
 * set_config(..., true) in the request's transaction so grants and row level security decide.
 */
export const StrataServerPreset: GraphileConfig.Preset = {
  plugins: [StrataDataAsTextPlugin],
  grafast: {
    context(requestContext) {
      const auth = requestContext.strata?.auth;
      if (!auth) return {};
      const pgSettings = { role: auth.role, "request.jwt.claims": JSON.stringify(auth.claims) };
      // Grafast's context types the client as node-postgres's own (with `rawClient`); the preset's plugins
      // only call `query` and `withTransaction`, which Strata's clients provide.
      const withPgClient = requestContext.strata?.withPgClient as
        WithPgClient<NodePostgresPgClient> | undefined;
      return withPgClient ? { pgSettings, withPgClient } : { pgSettings };
    },
  },
};
