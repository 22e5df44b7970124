/**
 * What a project serves (its edge functions' answers, its storage objects) comes from the API's own origin,
 * where the Studio's session cookie and the Management API live. `sandbox` makes a page among them an opaque
 * origin: its scripts cannot read the API's answers or send the Studio's cookie (SameSite) on their own.
 */
export const TENANT_CONTENT_POLICY = "sandbox";

/**
 * Headers as node:http's raw list (name, value, name, value, ...: duplicates kept) with the sandbox added to
 * any Content-Security-Policy of the tenant's own (both apply) and `nosniff` in place of the tenant's own.
 */
export function withTenantContentPolicy(raw: readonly string[]): string[] {
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].toLowerCase() !== "x-content-type-options") headers.push(raw[i], raw[i + 1]);
  }
  headers.push("content-security-policy", TENANT_CONTENT_POLICY, "x-content-type-options", "nosniff");
  return headers;
}
