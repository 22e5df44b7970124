/**
 * What a Management API path addresses, read before routing (membership, rate-limit scope): the project of
 * `/v1/projects/{ref}/...` or the organization of `/v1/organizations/{slug}/...`.
 */
export function addressedBy(path: string): { project?: string; organization?: string } {
  const project = /^\/v[12]\/projects\/([^/]+)/.exec(path)?.[1];
  if (project && project !== "available-regions") return { project };
  const organization = /^\/v[12]\/organizations\/([^/]+)/.exec(path)?.[1];
  return organization ? { organization } : {};
}
