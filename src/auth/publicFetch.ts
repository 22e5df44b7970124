import { lookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import ipaddr from "ipaddr.js";
import { Agent, fetch as pinnedFetch } from "undici";

/**
 * Fetches a JSON document a project's settings point to (a third-party JWKS or OIDC discovery document) the
 * way a request from outside would: https only (plain http only to this machine's loopback, for local
 * providers), never to a private, link-local or otherwise internal address, redirects checked the same way,
 * within a time and size limit. Errors name the URL's problem, never the body of what answered.
 */

const TIMEOUT_MS = 5000;
const MAX_BYTES = 256 * 1024;
const MAX_REDIRECTS = 3;

export class UnsafeUrl extends Error {}

const isLoopback = (address: string) => ipaddr.process(address).range() === "loopback";

/** Addresses a fetch may reach: public unicast ones, and loopback (this machine). */
function reachable(address: string): boolean {
  const range = ipaddr.process(address).range();
  return range === "unicast" || range === "loopback";
}

/** A URL whose host was checked, with the address the check approved: the request goes to that address. */
interface CheckedUrl {
  url: URL;
  address: LookupAddress;
}

async function checkUrl(raw: string): Promise<CheckedUrl> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeUrl(`not a URL: ${raw}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new UnsafeUrl(`${url.protocol} is not allowed`);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const addresses = ipaddr.isValid(host)
    ? [host]
    : (await lookup(host, { all: true }).catch(() => [])).map((a) => a.address);
  if (!addresses.length) throw new UnsafeUrl(`${url.hostname} does not resolve`);
  if (!addresses.every(reachable)) throw new UnsafeUrl(`${url.hostname} is a private or internal address`);
  if (url.protocol === "http:" && !addresses.every(isLoopback))
    throw new UnsafeUrl(`${url.origin} must use https`);
  return {
    url,
    address: { address: addresses[0], family: ipaddr.parse(addresses[0]).kind() === "ipv6" ? 6 : 4 },
  };
}

/**
 * A connection that reaches the checked address and nothing else: the host name is not resolved a second
 * time, so a DNS answer that changes between the check and the request (DNS rebinding) cannot redirect it
 * to an internal address. TLS still verifies the certificate against the host name.
 */
function pinnedTo(address: LookupAddress): Agent {
  return new Agent({
    connect: {
      lookup: (_hostname, options, callback) => {
        if ((options as { all?: boolean }).all)
          (callback as (e: null, a: LookupAddress[]) => void)(null, [address]);
        else callback(null, address.address, address.family);
      },
    },
  });
}

async function readLimited(res: Response): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_BYTES) {
      await reader.cancel();
      throw new UnsafeUrl(`the document is larger than ${MAX_BYTES} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** GETs `raw` as JSON under the rules above (or sends `init`: a POST is never redirected). */
export async function fetchPublicJson(
  raw: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<unknown> {
  const { text, url } = await fetchPublic(raw, init);
  if (text === null) return null;
  try {
    return JSON.parse(text);
  } catch {
    throw new UnsafeUrl(`${url.origin}${url.pathname} did not answer JSON`);
  }
}

/** GETs `raw` as text under the rules above (a SAML provider's metadata document). */
export async function fetchPublicText(raw: string): Promise<string> {
  return (await fetchPublic(raw, {})).text ?? "";
}

async function fetchPublic(
  raw: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<{ text: string | null; url: URL }> {
  let checked = await checkUrl(raw);
  for (let hop = 0; ; hop++) {
    const url = checked.url;
    const dispatcher = pinnedTo(checked.address);
    try {
      const res = await pinnedFetch(url, {
        ...init,
        redirect: "manual",
        signal: AbortSignal.timeout(TIMEOUT_MS),
        dispatcher,
      });
      if (res.status >= 300 && res.status < 400 && res.headers.get("location") && !init.method) {
        if (hop >= MAX_REDIRECTS) throw new UnsafeUrl("too many redirects");
        checked = await checkUrl(new URL(res.headers.get("location")!, url).href);
        continue;
      }
      if (!res.ok) throw new UnsafeUrl(`${url.origin}${url.pathname} answered ${res.status}`);
      if (res.status === 204) return { text: null, url };
      return { text: await readLimited(res as unknown as Response), url };
    } finally {
      void dispatcher.destroy().catch(() => {});
    }
  }
}
