import ipaddr from "ipaddr.js";
import {
  Command,
  IPv4ProxyAddress,
  IPv6ProxyAddress,
  V1BinaryProxyProtocol,
  V2ProxyProtocol,
} from "proxy-protocol-js";

/**
 * The PROXY protocol header (HAProxy's `send-proxy` v1 text and `send-proxy-v2` binary) a TCP proxy puts before
 * a client's first bytes, naming the client's address: behind one, every connection's own peer is the proxy.
 * Framing is decided here (where the header ends, so the PostgreSQL bytes after it are kept); the header's fields
 * are read by proxy-protocol-js. A PostgreSQL client's first message starts with its length, which neither
 * signature can be (both would read as over 200 MB), so a connection without a header is told apart.
 */

const V1_SIGNATURE = Buffer.from("PROXY ");
const V2_SIGNATURE = Buffer.from("\r\n\r\n\0\r\nQUIT\n", "binary");
/** v1's longest line (the spec's 107 bytes, CRLF included). */
const V1_MAX_LENGTH = 107;
/** v2's fixed part: signature, version/command, family/transport, length. */
const V2_FIXED_LENGTH = 16;
/** Room for addresses and the TLVs a proxy may add (HAProxy's own stay far below it). */
const V2_MAX_LENGTH = 4096;

export class ProxyHeaderError extends Error {}

/** True while `buffered` could still become `signature` (or already starts with it). */
function mayStartWith(buffered: Buffer, signature: Buffer): boolean {
  const n = Math.min(buffered.length, signature.length);
  return buffered.subarray(0, n).equals(signature.subarray(0, n));
}

/**
 * The length of the PROXY header at the start of `buffered`: 0 when the bytes are no header, undefined while
 * more bytes are needed to tell. Throws ProxyHeaderError for a header too long to be one.
 */
export function proxyHeaderLength(buffered: Buffer): number | undefined {
  if (buffered.length === 0) return undefined;
  if (mayStartWith(buffered, V1_SIGNATURE)) {
    const end = buffered.indexOf("\r\n");
    if (end >= 0 && end + 2 <= V1_MAX_LENGTH) return end + 2;
    if (end >= 0 || buffered.length >= V1_MAX_LENGTH) throw new ProxyHeaderError("PROXY v1 line too long");
    return undefined;
  }
  if (mayStartWith(buffered, V2_SIGNATURE)) {
    if (buffered.length < V2_FIXED_LENGTH) return undefined;
    const length = V2_FIXED_LENGTH + buffered.readUInt16BE(14);
    if (length > V2_MAX_LENGTH) throw new ProxyHeaderError("PROXY v2 header too long");
    return length;
  }
  return 0;
}

/**
 * The client's address a complete PROXY header names, or undefined when it names none: v1's `UNKNOWN`, v2's
 * LOCAL command (the proxy's own health check) or a family without an address (UNSPEC, UNIX).
 */
export function proxiedAddress(header: Buffer): string | undefined {
  try {
    if (header.subarray(0, V1_SIGNATURE.length).equals(V1_SIGNATURE)) {
      if (header.toString("latin1").startsWith("PROXY UNKNOWN")) return undefined;
      return V1BinaryProxyProtocol.parse(header).source.ipAddress;
    }
    const parsed = V2ProxyProtocol.parse(header);
    if (parsed.command === Command.LOCAL) return undefined;
    const address = parsed.proxyAddress;
    if (address instanceof IPv4ProxyAddress || address instanceof IPv6ProxyAddress)
      return ipaddr.fromByteArray([...address.sourceAddress.address]).toString();
    return undefined;
  } catch (e) {
    throw new ProxyHeaderError(`invalid PROXY header: ${(e as Error).message}`);
  }
}
