import { isIP } from "node:net";

// CIDR arithmetic on address text, as pg_hba.conf and the Management API's network rules take it.

/** A CIDR of the given family as pg_hba.conf takes it, or why not (host bits must be zero). */
export function checkCidr(value: string, family: 4 | 6): string | undefined {
  const [address, bits, extra] = value.split("/");
  const max = family === 4 ? 32 : 128;
  if (extra !== undefined || isIP(address) !== family) return `must be an IPv${family} CIDR`;
  if (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= max))
    return `must be an IPv${family} CIDR (prefix length 0-${max})`;
  const prefix = bits === undefined ? max : Number(bits);
  const value128 = family === 4 ? ipv4Value(address) : ipv6Value(address);
  const hostBits = BigInt(max - prefix);
  if (value128 & ((1n << hostBits) - 1n)) return `has bits set past its /${prefix} prefix`;
  return undefined;
}

function ipv4Value(address: string): bigint {
  return address.split(".").reduce((v, part) => (v << 8n) | BigInt(Number(part)), 0n);
}

function ipv6Value(address: string): bigint {
  let text = address;
  // A trailing dotted IPv4 part (::ffff:1.2.3.4) becomes two hex groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    const n = ipv4Value(v4[1]);
    text = text.slice(0, -v4[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = text.split("::");
  const headGroups = head ? head.split(":") : [];
  const tailGroups = tail ? tail.split(":") : [];
  const groups =
    tail === undefined
      ? headGroups
      : [...headGroups, ...Array(8 - headGroups.length - tailGroups.length).fill("0"), ...tailGroups];
  return groups.reduce((v, g) => (v << 16n) | BigInt(parseInt(g || "0", 16)), 0n);
}

function cidrParts(cidr: string): { family: 4 | 6; value: bigint; prefix: number } {
  const [address, bits] = cidr.split("/");
  const family = isIP(address) === 6 ? 6 : 4;
  const width = family === 4 ? 32 : 128;
  return {
    family,
    value: family === 4 ? ipv4Value(address) : ipv6Value(address),
    prefix: bits === undefined ? width : Number(bits),
  };
}

/** True when `address` (an IP) lies within `cidr`. */
export function cidrContains(cidr: string, address: string): boolean {
  if (isIP(address) === 0) return false;
  const c = cidrParts(cidr);
  const a = cidrParts(address);
  if (c.family !== a.family) return false;
  const shift = BigInt((c.family === 4 ? 32 : 128) - c.prefix);
  return a.value >> shift === c.value >> shift;
}

/** The CIDRs in both lists: of two nested CIDRs, the narrower one; disjoint ones give nothing. */
export function intersectCidrs(a: string[], b: string[]): string[] {
  const out = new Set<string>();
  for (const x of a)
    for (const y of b) {
      const px = cidrParts(x);
      const py = cidrParts(y);
      if (px.family !== py.family) continue;
      const [wide, narrow] = px.prefix <= py.prefix ? [px, py] : [py, px];
      const shift = BigInt((wide.family === 4 ? 32 : 128) - wide.prefix);
      if (narrow.value >> shift === wide.value >> shift) out.add(px.prefix <= py.prefix ? y : x);
    }
  return [...out];
}
