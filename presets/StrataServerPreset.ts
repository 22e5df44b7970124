import type { WithPgClient } from "@dataplan/pg";
import type { NodePostgresPgClient } from "@dataplan/pg/adaptors/pg";
import type { RequestAuth } from "../src/auth/dataAuth";

/** What Strata's HTTP layer hands to grafast for every request. */
export interface StrataRequestContext {
  auth: RequestAuth;
  /**
   * A client already in the request's transaction (role and claims set): every statement of the
   * request runs there, so a mutation request commits or rolls back as a whole, as in pg_graphql.
   */
  withPgClient?: WithPgClient<NodePostgresPgClient>;
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
      const withPgClient = requestContext.strata?.withPgClient;
      return withPgClient ? { pgSettings, withPgClient } : { pgSettings };
    },
  },
};
