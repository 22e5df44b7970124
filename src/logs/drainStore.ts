import type pg from "pg";
import { kekOf } from "../platform/kek";
import { DRAIN_CONFIG_PURPOSE, type DrainRow, type WebhookConfig } from "./drains";

export interface DrainInput {
  name: string;
  description: string;
  backend_type: string;
  config: WebhookConfig;
}

export type OpenDrain = DrainRow & { configPlain: WebhookConfig };

function opened(pool: pg.Pool, row: DrainRow): OpenDrain {
  return { ...row, configPlain: JSON.parse(kekOf(pool).open(row.config, DRAIN_CONFIG_PURPOSE)) };
}

const sealed = (pool: pg.Pool, config: WebhookConfig) =>
  kekOf(pool).seal(JSON.stringify(config), DRAIN_CONFIG_PURPOSE);

export async function drainsOf(pool: pg.Pool, ref: string): Promise<OpenDrain[]> {
  const { rows } = await pool.query<DrainRow>(
    "select * from platform.log_drains where project_ref = $1 order by created_at",
    [ref],
  );
  return rows.map((r) => opened(pool, r));
}

/** A new drain starts after the events already recorded: it forwards what happens from now on. */
export async function createDrain(pool: pg.Pool, ref: string, input: DrainInput): Promise<OpenDrain> {
  const { rows } = await pool.query<DrainRow>(
    `insert into platform.log_drains (project_ref, name, description, backend_type, config, cursor)
     values ($1, $2, $3, $4, $5, coalesce((select max(id) from platform.log_events where project_ref = $1), 0))
     returning *`,
    [ref, input.name, input.description, input.backend_type, sealed(pool, input.config)],
  );
  return opened(pool, rows[0]);
}

export async function updateDrain(
  pool: pg.Pool,
  ref: string,
  id: string,
  input: DrainInput,
): Promise<OpenDrain | undefined> {
  const { rows } = await pool.query<DrainRow>(
    `update platform.log_drains set name = $3, description = $4, backend_type = $5, config = $6,
            last_error = null, updated_at = now()
      where project_ref = $1 and id::text = $2 returning *`,
    [ref, id, input.name, input.description, input.backend_type, sealed(pool, input.config)],
  );
  return rows[0] && opened(pool, rows[0]);
}

export async function deleteDrain(pool: pg.Pool, ref: string, id: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    "delete from platform.log_drains where project_ref = $1 and id::text = $2",
    [ref, id],
  );
  return (rowCount ?? 0) > 0;
}
