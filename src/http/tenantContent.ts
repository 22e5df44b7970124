import type { IncomingHttpHeaders } from "node:http";

/**
 * What a project serves (its edge functions' answers, its storage objects) comes from the API's own origin,
 * where the Studio's session cookie and the Management API live. `sandbox` makes a page among them an opaque
 * origin: its scripts cannot read the API's answers or send the Studio's cookie (SameSite) on their own.
 */
export const TENANT_CONTENT_POLICY = "sandbox";

/** `headers` with the sandbox added to any Content-Security-Policy of the tenant's own (both apply). */
export function withTenantContentPolicy(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const own = headers["content-security-policy"];
  const policies = own === undefined ? [] : Array.isArray(own) ? own : [own];
  return {
    ...headers,
    "content-security-policy": [...policies, TENANT_CONTENT_POLICY],
    "x-content-type-options": "nosniff",
  };
}
