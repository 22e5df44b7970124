import type { RequestAuth } from "../src/auth/dataAuth";

/** What Strata's HTTP layer hands to grafast for every request. */
export interface StrataRequestContext {
  auth: RequestAuth;
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
      return {
        pgSettings: { role: auth.role, "request.jwt.claims": JSON.stringify(auth.claims) },
      };
    },
  },
};
