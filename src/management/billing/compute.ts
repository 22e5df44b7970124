import type pg from "pg";
import { withOneOffClient } from "../../db/client";
import { runUtilityStatement } from "../../db/utility";
import { DEFAULT_POOL_SIZE } from "../../projects/runtime";

/**
 * Compute sizes as the platform documents them, by what Strata can apply: `pool` is the pooler's
 * default_pool_size of the size (the size of Strata's data pool of the project on each node) and
 * `connections` the most direct connections (the CONNECTION LIMIT of the project's owner role, the login
 * users connect with). Strata does not size CPU or memory: projects share their cluster's.
 */
export const COMPUTE_SIZES = [
  { id: "ci_micro", name: "Micro", pool: 15, connections: 60 },
  { id: "ci_small", name: "Small", pool: 15, connections: 90 },
  { id: "ci_medium", name: "Medium", pool: 15, connections: 120 },
  { id: "ci_large", name: "Large", pool: 20, connections: 160 },
  { id: "ci_xlarge", name: "XL", pool: 20, connections: 240 },
  { id: "ci_2xlarge", name: "2XL", pool: 25, connections: 380 },
  { id: "ci_4xlarge", name: "4XL", pool: 32, connections: 480 },
  { id: "ci_8xlarge", name: "8XL", pool: 64, connections: 490 },
  { id: "ci_12xlarge", name: "12XL", pool: 96, connections: 500 },
  { id: "ci_16xlarge", name: "16XL", pool: 128, connections: 500 },
] as const;
export type ComputeSize = (typeof COMPUTE_SIZES)[number];

/** Without a compute add-on: Strata's own pool size and no connection limit (-1), as before add-ons acted. */
export const BASELINE = { pool: DEFAULT_POOL_SIZE, connections: -1 };

export function computeSize(id: string | undefined): ComputeSize | undefined {
  return COMPUTE_SIZES.find((s) => s.id === id);
}

/** The owner role's CONNECTION LIMIT (roles are cluster-wide: any database of the cluster will do). */
export async function applyConnectionLimit(
  client: pg.ClientBase,
  ref: string,
  connections: number,
): Promise<void> {
  await runUtilityStatement(client, "alter role %I connection limit %s", [
    `postgres_${ref}`,
    String(Math.trunc(connections)),
  ]);
}

/**
 * The compute add-on a new project's `desired_instance_size` asks for (`small` → ci_small); the platform's
 * smallest sizes (pico, nano) are Strata's baseline (no add-on). Undefined: a size Strata does not offer.
 */
export function computeOfInstanceSize(size: string): string | null | undefined {
  if (size === "pico" || size === "nano") return null;
  return computeSize(`ci_${size}`)?.id;
}

/**
 * At creation (`desired_instance_size`): the compute add-on stored before the database existed sets the new
 * owner role's connection limit (its pool size is read from the pooler settings when the project opens).
 */
export async function applyStoredComputeLimit(
  platformPool: pg.Pool,
  clusterAdminUrl: string,
  ref: string,
): Promise<void> {
  const { rows } = await platformPool.query(
    "select value from platform.project_settings where project_ref = $1 and kind = 'addons'",
    [ref],
  );
  const selected: { type: string; variant: { id: string } }[] = rows[0]?.value?.selected ?? [];
  const size = computeSize(selected.find((s) => s.type === "compute_instance")?.variant.id);
  if (!size) return;
  await withOneOffClient({ connectionString: clusterAdminUrl, connectionTimeoutMillis: 10_000 }, (client) =>
    applyConnectionLimit(client, ref, size.connections),
  );
}
