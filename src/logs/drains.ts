import type pg from "pg";
import { withAdminTransaction } from "../db/transaction";
import type { Logger } from "../log";
import { fetchOutbound } from "../net/outbound";
import type { KeyEncryptionKey } from "../platform/kek";

/** Backends Strata can forward to (HTTP); the platform's others need services this machine does not run. */
export const DRAIN_BACKENDS = ["webhook"] as const;
export const DRAIN_CONFIG_PURPOSE = "platform.log_drains.config";
const BATCH = 500;

export interface WebhookConfig {
  url: string;
  headers?: Record<string, string>;
  http?: "http1" | "http2";
  gzip?: boolean;
}

export interface DrainRow {
  id: string;
  project_ref: string;
  name: string;
  description: string;
  backend_type: string;
  config: string;
  cursor: string;
  last_error: string | null;
}

/**
 * Forwards each drain's new log events (`platform.log_events` after the drain's cursor) in batches. A failed
 * delivery leaves the cursor, so the same batch is sent again on the next round (every `intervalMs`); several
 * Strata processes share the work (a drain is locked while it is sent).
 */
export class DrainForwarder {
  private readonly timer: NodeJS.Timeout;
  private running = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly kek: KeyEncryptionKey,
    private readonly log: Logger,
    private readonly beforeRound: () => Promise<void>,
    intervalMs = 2000,
  ) {
    this.timer = setInterval(() => void this.round(), intervalMs);
    this.timer.unref();
  }

  async round(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      const { rows } = await this.pool.query<{ id: string }>("select id from platform.log_drains");
      if (rows.length) await this.beforeRound();
      for (const { id } of rows) await this.forward(id);
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, "log drains round failed");
    } finally {
      this.running = false;
    }
  }

  private forward(id: string): Promise<void> {
    return withAdminTransaction(this.pool, async (client) => {
      const drain = (
        await client.query<DrainRow>(
          "select * from platform.log_drains where id = $1 for update skip locked",
          [id],
        )
      ).rows[0];
      if (!drain) return;
      const { rows: events } = await client.query(
        `select id, source, timestamp, event_message, metadata from platform.log_events
          where project_ref = $1 and id > $2 order by id limit ${BATCH}`,
        [drain.project_ref, drain.cursor],
      );
      if (!events.length) return;
      try {
        await send(drain.backend_type, JSON.parse(this.kek.open(drain.config, DRAIN_CONFIG_PURPOSE)), events);
        await client.query(
          "update platform.log_drains set cursor = $2, last_error = null, updated_at = now() where id = $1",
          [id, events[events.length - 1].id],
        );
      } catch (e) {
        await client.query("update platform.log_drains set last_error = $2 where id = $1", [
          id,
          (e as Error).message.slice(0, 500),
        ]);
      }
    });
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/**
 * One batch as the backend takes it: a JSON array of events, POSTed under the outbound policy (a public
 * address only; http or https, as the platform's HTTP drains allow; never redirected).
 */
async function send(backend: string, config: WebhookConfig, events: unknown[]): Promise<void> {
  if (backend !== "webhook") throw new Error(`backend ${backend} is not supported`);
  const res = await fetchOutbound(config.url, {
    method: "POST",
    headers: { ...(config.headers ?? {}), "content-type": "application/json" },
    body: JSON.stringify(events),
    allowHttp: true,
    timeoutMs: 10_000,
    maxBytes: 0,
    truncate: true,
  });
  if (res.status < 200 || res.status >= 300) throw new Error(`the drain's endpoint answered ${res.status}`);
}
