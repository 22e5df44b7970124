import { lookup } from "node:dns/promises";
import type { LookupAddress } from "node:dns";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import ipaddr from "ipaddr.js";
import type { Agent } from "undici";

/**
 * The one outbound policy for every address a tenant supplies: database webhooks, log drains, auth hooks,
 * third-party JWKS and OIDC discovery, OAuth provider endpoints, SAML metadata, a branch's notify_url, the
 * project's SMTP server. Only public addresses are reached, checked after DNS resolution and again at every
 * redirect; the connection goes to the address the check approved (a second DNS answer cannot move it) while
 * TLS still verifies the certificate against the name; every exchange has a time and a size limit. https is
 * required unless the caller allows plain http (webhooks and drains, as the platform does).
 *
 * Imports no other Strata layer, so auth, webhooks, logs and management all use it.
 */

/** Why an outbound request was not made or did not succeed; `refused` when the policy said no. */
export class OutboundError extends Error {
  constructor(
    message: string,
    readonly refused = false,
  ) {
    super(message);
  }
}

const refuse = (message: string) => new OutboundError(message, true);

const DEFAULT_TIMEOUT_MS = 5000;
const DEFAULT_MAX_BYTES = 256 * 1024;
const MAX_REDIRECTS = 3;

let loopbackAllowed = false;

/**
 * Lets outbound requests reach this machine's loopback (127.0.0.0/8, ::1), over plain http too: tests run
 * the server in-process and their receivers listen on 127.0.0.1. Only code can turn it on this way, and only
 * under NODE_ENV=test (set by jest; `strata start` sets production).
 */
export function allowLoopbackForTests(allowed = true): void {
  if (process.env.NODE_ENV !== "test")
    throw new Error("allowLoopbackForTests is only for tests (NODE_ENV=test)");
  loopbackAllowed = allowed;
}

/**
 * The operator's switch for a local test setup (`STRATA_OUTBOUND_LOOPBACK=allow`: the platform's own client
 * test suites run their OIDC provider and receivers on 127.0.0.1): loopback is reached as in tests. Start-up
 * says so in a warning on every start; private and link-local addresses stay refused.
 */
export function allowLoopbackForLocalTesting(): void {
  loopbackAllowed = true;
}

const cidrs = (list: string[]) => list.map((cidr) => ipaddr.parseCIDR(cidr));

/**
 * IPv4 that is not the public internet: "this network" (0/8, with 0.0.0.0), private (RFC 1918), carrier-grade
 * NAT, loopback, link-local (the cloud metadata address), IETF assignments, the documentation and benchmark
 * nets, the 6to4 relay, multicast, and the reserved 240/4 (with the broadcast address).
 */
const IPV4_NOT_PUBLIC = cidrs([
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.88.99.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
]) as [ipaddr.IPv4, number][];

/**
 * IPv6 is public only within global unicast (2000::/3), less the IETF assignments (Teredo, benchmarking,
 * ORCHID) and the documentation prefixes: everything else (loopback, unspecified, ULA fc00::/7, link-local
 * fe80::/10, site-local, multicast, discard) is not. Forms that carry an IPv4 address are judged by it.
 */
const IPV6_GLOBAL = ipaddr.parseCIDR("2000::/3") as [ipaddr.IPv6, number];
const IPV6_NOT_PUBLIC = cidrs(["2001::/23", "2001:db8::/32", "3fff::/20"]) as [ipaddr.IPv6, number][];
const IPV4_MAPPED = ipaddr.parseCIDR("::ffff:0:0/96") as [ipaddr.IPv6, number];
const NAT64 = ipaddr.parseCIDR("64:ff9b::/96") as [ipaddr.IPv6, number];
const SIX_TO_FOUR = ipaddr.parseCIDR("2002::/16") as [ipaddr.IPv6, number];

const v4Of = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);

/** The IPv4 address an IPv4-mapped, NAT64 (64:ff9b::/96) or 6to4 address stands for. */
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = ip.parts;
  if (ip.match(IPV4_MAPPED) || ip.match(NAT64)) return v4Of(p[6], p[7]);
  if (ip.match(SIX_TO_FOUR)) return v4Of(p[1], p[2]);
  return undefined;
}

/** `address` as IPv4 when it is or carries one, else as IPv6. */
function canonical(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const ip = ipaddr.parse(address);
  return ip.kind() === "ipv6" ? (embeddedIPv4(ip as ipaddr.IPv6) ?? ip) : ip;
}

const isLoopback = (ip: ipaddr.IPv4 | ipaddr.IPv6) => ip.range() === "loopback";

function isPublic(ip: ipaddr.IPv4 | ipaddr.IPv6): boolean {
  if (ip.kind() === "ipv4") return !IPV4_NOT_PUBLIC.some((range) => (ip as ipaddr.IPv4).match(range));
  const v6 = ip as ipaddr.IPv6;
  return v6.match(IPV6_GLOBAL) && !IPV6_NOT_PUBLIC.some((range) => v6.match(range));
}

/** This machine's own addresses (a public one included): reaching them reaches its listening sockets. */
function ownAddresses(): Set<string> {
  const own = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) own.add(canonical(a.address).toNormalizedString());
  }
  return own;
}

/**
 * Whether the policy lets a request reach `address`; loopback only while a test switch is on. A mail relay (the
 * project's SMTP server) may also be on this machine or the operator's private network, as self-hosted mail
 * servers are: only its loopback and private (RFC 1918, ULA) addresses are let through besides public ones,
 * never link-local (the cloud metadata address), carrier-grade NAT or the other reserved ranges.
 */
function reachable(address: string, mailRelay = false): boolean {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = canonical(address);
  } catch {
    return false;
  }
  if (isLoopback(ip)) return loopbackAllowed || mailRelay;
  if (mailRelay && ["private", "uniqueLocal"].includes(ip.range())) return true;
  return isPublic(ip) && !ownAddresses().has(ip.toNormalizedString());
}

/**
 * Resolves `host` (a name or an address literal) and approves it when every address it resolves to is
 * reachable: a name with one internal address among public ones is refused, since any of them may be used.
 * Answers the address to connect to.
 */
export async function approvedAddress(
  host: string,
  opts: { mailRelay?: boolean } = {},
): Promise<LookupAddress> {
  const bare = host.replace(/^\[|\]$/g, "");
  // RFC 6761: names under .invalid never resolve; asking a resolver may only wait for its timeout.
  if (/(^|\.)invalid\.?$/i.test(bare)) throw new OutboundError(`${host} does not resolve`);
  const addresses = isIP(bare)
    ? [bare]
    : (await lookup(bare, { all: true }).catch(() => [])).map((a) => a.address);
  if (!addresses.length) throw new OutboundError(`${host} does not resolve`);
  if (!addresses.every((a) => reachable(a, opts.mailRelay)))
    throw refuse(`${host} is a private or internal address`);
  return { address: addresses[0], family: isIP(addresses[0]) === 6 ? 6 : 4 };
}

/** A URL whose host was approved, with the address to connect to. */
interface CheckedUrl {
  url: URL;
  address: LookupAddress;
}

async function checkUrl(raw: string, allowHttp: boolean): Promise<CheckedUrl> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse(`not a URL: ${raw}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") throw refuse(`${url.protocol} is not allowed`);
  if (url.username || url.password) throw refuse("credentials in the URL are not allowed");
  const address = await approvedAddress(url.hostname);
  const loopback = isLoopback(canonical(address.address));
  if (url.protocol === "http:" && !allowHttp && !loopback) throw refuse(`${url.origin} must use https`);
  return { url, address };
}

/**
 * A connection that reaches the approved address and nothing else: the host name is not resolved a second
 * time, so a DNS answer that changes between the check and the request (DNS rebinding) cannot move it.
 * TLS still verifies the certificate against the host name, and the request body travels on it too.
 */
/** undici is loaded with the first outbound request: most servers make none for minutes after starting. */
let undiciLibrary: typeof import("undici") | undefined;
const undici = () => (undiciLibrary ??= require("undici") as typeof import("undici"));

function pinnedTo(address: LookupAddress): Agent {
  return new (undici().Agent)({
    connect: {
      lookup: (_hostname, options, callback) => {
        if ((options as { all?: boolean }).all)
          (callback as (e: null, a: LookupAddress[]) => void)(null, [address]);
        else callback(null, address.address, address.family);
      },
    },
  });
}

/** At most `limit` bytes of a body: more fails, or is cut off when `truncate`. */
async function readAtMost(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
  truncate: boolean,
): Promise<string> {
  const reader = body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (size + value.byteLength > limit) {
        if (!truncate) throw new OutboundError(`the answer is larger than ${limit} bytes`);
        chunks.push(value.subarray(0, limit - size));
        break;
      }
      size += value.byteLength;
      chunks.push(value);
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return Buffer.concat(chunks).toString("utf8");
}

export interface OutboundRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Plain http to a public address as well as https (database webhooks, log drains). */
  allowHttp?: boolean;
  /** Follow redirects, each checked like the first URL (GET only); otherwise a 3xx is the answer. */
  followRedirects?: boolean;
  /** For the whole exchange, redirects and body included. */
  timeoutMs?: number;
  /** The most of the answer's body that is read: a longer one fails, or is cut off when `truncate`. */
  maxBytes?: number;
  truncate?: boolean;
}

export interface OutboundResponse {
  status: number;
  contentType: string | null;
  /** Every header of the answer, by lower-case name (several of one name joined with ", "). */
  headers: Record<string, string>;
  text: string;
  /** The URL that answered (after redirects). */
  url: URL;
}

/** A failed exchange as an OutboundError: a timeout by its limit, a network error with its code. */
function failure(e: unknown, timeoutMs: number): OutboundError {
  if (e instanceof OutboundError) return e;
  const error = e as Error & { cause?: { code?: unknown } };
  if (error.name === "TimeoutError") return new OutboundError(`Timeout of ${timeoutMs} ms reached`);
  const code = error.cause?.code;
  return new OutboundError(typeof code === "string" ? `${error.message} (${code})` : error.message);
}

/**
 * `work` unless `signal` fires first: a name's lookup is part of a request's time (a resolver that never answers
 * would otherwise hold the request past its timeout).
 */
function beforeTimeout<T>(work: Promise<T>, signal: AbortSignal, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new OutboundError(`Timeout of ${timeoutMs} ms reached`));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Sends one request under the policy above. */
export async function fetchOutbound(raw: string, req: OutboundRequest = {}): Promise<OutboundResponse> {
  const method = (req.method ?? "GET").toUpperCase();
  const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const signal = AbortSignal.timeout(timeoutMs);
  let checked = await beforeTimeout(checkUrl(raw, req.allowHttp === true), signal, timeoutMs);
  for (let hop = 0; ; hop++) {
    const dispatcher = pinnedTo(checked.address);
    try {
      const res = await undici().fetch(checked.url, {
        method,
        headers: req.headers,
        body: req.body,
        redirect: "manual",
        signal,
        dispatcher,
      });
      const location = res.headers.get("location");
      if (req.followRedirects && method === "GET" && res.status >= 300 && res.status < 400 && location) {
        await res.body?.cancel();
        if (hop >= MAX_REDIRECTS) throw refuse("too many redirects");
        checked = await beforeTimeout(
          checkUrl(new URL(location, checked.url).href, req.allowHttp === true),
          signal,
          timeoutMs,
        );
        continue;
      }
      const text = await readAtMost(
        res.body as ReadableStream<Uint8Array> | null,
        req.maxBytes ?? DEFAULT_MAX_BYTES,
        req.truncate === true,
      );
      return {
        status: res.status,
        contentType: res.headers.get("content-type"),
        headers: Object.fromEntries(res.headers),
        text,
        url: checked.url,
      };
    } catch (e) {
      throw failure(e, timeoutMs);
    } finally {
      void dispatcher.destroy().catch(() => {});
    }
  }
}

/** A document's URL as errors name it: no query string, which may carry a token. */
const named = (url: URL) => `${url.origin}${url.pathname}`;

/**
 * Fetches JSON (a JWKS, an OIDC discovery document, a hook's or OAuth provider's answer) over https under
 * the policy: a GET follows checked redirects, a POST (`init`) is never redirected; anything but a 2xx fails.
 * Answers null for 204. Errors name the URL's problem, never the body of what answered.
 */
export async function fetchPublicJson(
  raw: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<unknown> {
  const res = await fetchDocument(raw, init);
  if (res.status === 204) return null;
  try {
    return JSON.parse(res.text);
  } catch {
    throw new OutboundError(`${named(res.url)} did not answer JSON`);
  }
}

/** GETs a text document over https under the policy (a SAML provider's metadata). */
export async function fetchPublicText(raw: string): Promise<string> {
  return (await fetchDocument(raw, {})).text;
}

async function fetchDocument(
  raw: string,
  init: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<OutboundResponse> {
  const res = await fetchOutbound(raw, { ...init, followRedirects: true });
  if (res.status < 200 || res.status >= 300)
    throw new OutboundError(`${named(res.url)} answered ${res.status}`);
  return res;
}
