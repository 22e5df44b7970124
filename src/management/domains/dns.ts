import { promises as dns } from "node:dns";

/** The TXT record that proves a custom hostname's owner chose this project. */
export const challengeName = (hostname: string) => `_strata-challenge.${hostname}`;

/** A resolver asking `servers` (the system's resolvers when empty). */
export function resolverFor(servers: string[]): dns.Resolver {
  const resolver = new dns.Resolver({ timeout: 3000, tries: 2 });
  if (servers.length) resolver.setServers(servers);
  return resolver;
}

function missing(e: unknown): boolean {
  const code = (e as { code?: string }).code;
  return code === "ENODATA" || code === "ENOTFOUND" || code === "NXDOMAIN";
}

/**
 * Checks the DNS records a custom hostname needs: a CNAME to the project's own host and the TXT challenge
 * with the project's token. Answers what is wrong, one sentence per record (empty when both are right).
 */
export async function verifyHostnameRecords(
  resolver: dns.Resolver,
  hostname: string,
  origin: string,
  token: string,
): Promise<string[]> {
  const errors: string[] = [];
  try {
    const targets = (await resolver.resolveCname(hostname)).map((t) => t.replace(/\.$/, "").toLowerCase());
    if (!targets.includes(origin))
      errors.push(`CNAME record of ${hostname} points at ${targets.join(", ")}, not at ${origin}`);
  } catch (e) {
    errors.push(
      missing(e)
        ? `CNAME record of ${hostname} not found: create it pointing at ${origin}`
        : `CNAME record of ${hostname} could not be resolved (${(e as Error).message})`,
    );
  }
  const name = challengeName(hostname);
  try {
    const values = (await resolver.resolveTxt(name)).map((chunks) => chunks.join(""));
    if (!values.includes(token)) errors.push(`TXT record ${name} does not hold the verification value`);
  } catch (e) {
    errors.push(
      missing(e)
        ? `TXT record ${name} not found: create it with the verification value`
        : `TXT record ${name} could not be resolved (${(e as Error).message})`,
    );
  }
  return errors;
}
