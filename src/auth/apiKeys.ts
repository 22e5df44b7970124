import { randomBytes } from "node:crypto";
import type pg from "pg";
import { sha256 } from "../platform/ids";

/** The opaque key kinds and the API role each one acts as. */
export const OPAQUE_KEY_ROLES = { publishable: "anon", secret: "service_role" } as const;
export type OpaqueKeyType = keyof typeof OPAQUE_KEY_ROLES;

const PREFIXES: Record<OpaqueKeyType, string> = { publishable: "sb_publishable_", secret: "sb_secret_" };

/** A new opaque key value: the type's prefix and 32 random base64url characters. */
export function newOpaqueKey(type: OpaqueKeyType): string {
  return PREFIXES[type] + randomBytes(24).toString("base64url");
}

/** The shown start of a key: its type's prefix and four characters of the random part. */
export function visiblePrefix(type: OpaqueKeyType, value: string): string {
  return value.slice(0, PREFIXES[type].length + 4);
}

/** Whether a value has the shape of an opaque key (as opposed to a legacy JWT key). */
export function isOpaqueKey(value: string): boolean {
  return value.startsWith(PREFIXES.publishable) || value.startsWith(PREFIXES.secret);
}

export interface OpaqueKey {
  type: OpaqueKeyType;
  /** Claims a secret key's requests carry (`role` picks the role), from its `secret_jwt_template`. */
  template: Record<string, unknown> | null;
}

/** A live opaque key of `ref`, or undefined (unknown, deleted or another project's key). */
export async function lookupOpaqueKey(
  platformPool: pg.Pool,
  ref: string,
  value: string,
): Promise<OpaqueKey | undefined> {
  const { rows } = await platformPool.query(
    "select type, secret_jwt_template from platform.api_keys where key_hash = $1 and project_ref = $2",
    [sha256(value), ref],
  );
  return rows[0] && { type: rows[0].type, template: rows[0].secret_jwt_template };
}
