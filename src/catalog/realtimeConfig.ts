import type pg from "pg";
import { readSettings } from "../projects/settings";

/**
 * A project's realtime configuration (`/v1/projects/{ref}/config/realtime`), stored in
 * platform.project_settings: the Management API writes it, realtime reads it on every connect and join.
 */
export const REALTIME_DEFAULTS = {
  private_only: false,
  connection_pool: 2,
  max_concurrent_users: 200,
  max_events_per_second: 100,
  max_bytes_per_second: 100_000,
  max_channels_per_client: 100,
  max_joins_per_second: 100,
  max_presence_events_per_second: 100,
  max_payload_size_in_kb: 100,
  suspend: false,
  presence_enabled: true,
};

export type RealtimeConfig = typeof REALTIME_DEFAULTS;

export async function realtimeConfigOf(platformPool: pg.Pool, ref: string): Promise<RealtimeConfig> {
  return readSettings({ platformPool }, ref, "realtime", REALTIME_DEFAULTS);
}
