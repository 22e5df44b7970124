import type { WithPgClient } from "@dataplan/pg";
import type { NodePostgresPgClient } from "@dataplan/pg/adaptors/pg";

/** What Strata's HTTP layer hands to grafast for every request. */
export interface StrataRequestContext {
  /** The role and claims the data gate decided. */
  auth: { role: string; claims: Record<string, unknown> };
  /**
   * How the request's statements reach the database, role and claims applied: a mutation request's
   * client already in its transaction (it commits or rolls back as a whole, as in pg_graphql), or a
   * query request's one-round-trip reads.
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

/**
 * Server-side settings: every request runs as the role and claims the auth layer decided, applied with
 * set_config(..., true) in the request's transaction so grants and row level security decide.
 */
export const StrataServerPreset: GraphileConfig.Preset = {
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
