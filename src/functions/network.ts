import os from "node:os";

/**
 * Where a function's network reaches: the internet, never this machine nor the networks around it. Deno
 * enforces it with `--deny-net` and `--deny-import` (imports fetch modules too): an entry is checked against
 * the URL's host and again against every address a name resolves to, at connect time, so a name that
 * resolves (or is rebound) to a denied address is refused as well. IPv4-mapped IPv6 addresses count as the
 * IPv4 address. Listening needs an address too: 0.0.0.0, [::] and each of the host's own are denied, so a
 * function listens on no port.
 *
 * Deno 2.9 reads only IPv4 ranges in these flags (an IPv6 entry is one bracketed address), so IPv6 private
 * and link-local ranges cannot be listed: the host's own IPv6 addresses and the known metadata ones are.
 * Documentation and benchmarking ranges stay reachable: some egress proxies hand out such addresses for
 * every name. A resolver on a denied address (127.0.0.53, a VPC's) serves getaddrinfo (fetch, connect) but
 * not `Deno.resolveDns`, which queries it from the function.
 */
const DENIED = [
  "0.0.0.0/8", // "this network": 0.0.0.0 reaches this machine
  "10.0.0.0/8",
  "100.64.0.0/10", // carrier-grade NAT (and the 100.100.100.200 metadata service of some clouds)
  "127.0.0.0/8",
  "169.254.0.0/16", // link-local: cloud metadata at 169.254.169.254
  "172.16.0.0/12",
  "192.0.0.0/24", // IETF protocol assignments (a cloud's metadata at 192.0.0.192)
  "192.168.0.0/16",
  "224.0.0.0/4", // multicast
  "240.0.0.0/4", // reserved, and the broadcast address
  "[::]",
  "[::1]",
  "[fd00:ec2::254]", // a cloud's IPv6 metadata address
];

/** The host's own addresses, each as Deno's flags write it (IPv6 in brackets, without a zone). */
function ownAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flatMap((addresses) => addresses ?? [])
    .map((a) => (a.family === "IPv6" ? `[${a.address.split("%")[0]}]` : a.address));
}

/**
 * The hosts functions may not reach nor listen on: the ranges above and every address of the host's
 * interfaces, read when a worker starts (an interface that appears later counts from the next worker on).
 */
export function deniedHosts(): string[] {
  return [...new Set([...DENIED, ...ownAddresses()])];
}

/**
 * Environment variables Deno reads when it makes an HTTP client (proxies) or a TLS session (a key log file
 * it would write wherever the name points). A function may not set them: Deno ignores those writes. A SOCKS
 * proxy would be the way around the rules above, since Deno checks only its name, not its address.
 */
export const IGNORED_ENV = [
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "all_proxy",
  "no_proxy",
  "SSLKEYLOGFILE",
];
