import ipaddr from "ipaddr.js";
import type pg from "pg";
import {
  BANS_DEFAULTS,
  banAddress,
  banRules,
  jitLoginRole,
  RESTRICTIONS_DEFAULTS,
  STRATA_ADDRESSES,
} from "../projects/access";
import type { ProjectRecord } from "../projects/runtime";

/**
 * Whether the listener lets a client in, by the client's own address (PostgreSQL sees only the listener's, on
 * loopback, where pg_hba.conf restricts nothing): the project's network restrictions, its SSL enforcement, its
 * network bans (those not yet expired) and the networks of a just-in-time login, as pg_hba.conf applies them to
 * direct connections (src/projects/access.ts). Network restrictions apply to loopback clients too: none of
 * Strata's own connections comes through the listener.
 */

interface AccessSettings {
  restrictions: Partial<typeof RESTRICTIONS_DEFAULTS> | null;
  ssl: { database?: unknown } | null;
  bans: Partial<typeof BANS_DEFAULTS> | null;
  jit: { user_id: string; role: string; cidrs: string[] }[];
}

async function accessSettings(platformPool: pg.Pool, ref: string): Promise<AccessSettings> {
  const { rows } = await platformPool.query<AccessSettings>(
    `select (select value from platform.project_settings where project_ref = $1 and kind = 'network_restrictions') as restrictions,
            (select value from platform.project_settings where project_ref = $1 and kind = 'ssl_enforcement') as ssl,
            (select value from platform.project_settings where project_ref = $1 and kind = 'network_bans') as bans,
            coalesce((select json_agg(json_build_object('user_id', g.user_id::text, 'role', g.role,
                                                        'cidrs', g.allowed_cidrs || g.allowed_cidrs_v6))
                        from platform.jit_grants g where g.project_ref = $1), '[]') as jit`,
    [ref],
  );
  return rows[0];
}

/** True when `address` is within one of `cidrs` (of its own family). */
export function withinCidrs(address: string, cidrs: string[]): boolean {
  const parsed = ipaddr.parse(address);
  return cidrs.some((cidr) => {
    try {
      const range = ipaddr.parseCIDR(cidr);
      // Same family checked first: match() compares addresses of one kind only.
      return (
        parsed.kind() === range[0].kind() && (parsed as ipaddr.IPv4).match(range as [ipaddr.IPv4, number])
      );
    } catch {
      return false;
    }
  });
}

/** A ban of `entry` that has not ended (one without an end recorded is lifted by the cluster's sweep). */
function inForce(bans: Partial<typeof BANS_DEFAULTS>, entry: string, now: number): boolean {
  const ends = bans.expires_at?.[entry];
  return !ends || Date.parse(ends) > now;
}

/** Why `login` from `address` may not connect to the project (a message for the client), or undefined. */
export async function refusal(
  platformPool: pg.Pool,
  record: ProjectRecord,
  address: string,
  login: string,
  tls: boolean,
): Promise<string | undefined> {
  const settings = await accessSettings(platformPool, record.ref);
  if (settings.ssl?.database === true && !tls) return "SSL connection is required";

  const superuser = decodeURIComponent(new URL(record.adminUrl).username);
  const bans = banRules(settings.bans, superuser);
  const now = Date.now();
  const stored = settings.bans ?? {};
  const entries = (stored.banned ?? []).filter((e) => banAddress(e) === address && inForce(stored, e, now));
  const banned = STRATA_ADDRESSES.includes(address)
    ? entries.length > 0 && (bans.loopbackBans ?? []).some((b) => b.address === address && b.user === login)
    : entries.length > 0 && bans.banned.includes(address);
  if (banned) return `Address ${address} is banned from project ${record.ref} after failed logins`;

  const restrictions = { ...RESTRICTIONS_DEFAULTS, ...settings.restrictions };
  const allowed = [...restrictions.dbAllowedCidrs, ...restrictions.dbAllowedCidrsV6];
  if (!withinCidrs(address, allowed)) return "Address not in tenant allow_list";

  const grant = settings.jit.find((g) => jitLoginRole(record.ref, g.user_id, g.role) === login);
  if (grant && grant.cidrs.length > 0 && !withinCidrs(address, grant.cidrs))
    return "Address not in the allowed networks of this just-in-time login";
  return undefined;
}
