import type { PoolClient } from "pg";
import type { AppContext } from "../context";
import { withAdminTransaction } from "../db/transaction";
import { fetchOutbound, OutboundError } from "../net/outbound";
import type { ProjectRuntime } from "../projects/runtime";

/**
 * Sends the HTTP requests database webhooks queue (`supabase_functions.http_request`, sql/project/610): for
 * every project that enabled webhooks, it claims due requests (`for update skip locked`, so several nodes
 * share one queue), sends each with its timeout under the outbound policy (public addresses only; http or
 * https, as the platform allows), records the answer in `supabase_functions.http_responses` and retries a
 * failed send (network error or 5xx) up to MAX_ATTEMPTS times with growing delays. A request the policy
 * refuses is recorded at once, with the reason. The queue is the tenant's to fill: it is read and written
 * as `strata_webhook_sender`, never as the superuser.
 */

const POLL_MS = 250;
const REFRESH_MS = 10_000;
const BATCH = 20;
export const MAX_ATTEMPTS = 3;
const RETRY_DELAYS_S = [1, 5];
/** What of a response body is kept. */
const CONTENT_LIMIT = 64 * 1024;
/** A webhook's own timeout (`timeout_ms`, 1000 by default) is capped: a slow endpoint holds a batch. */
const MAX_TIMEOUT_MS = 10_000;

interface QueuedRequest {
  id: string;
  method: "GET" | "POST";
  url: string;
  headers: Record<string, string>;
  params: Record<string, string>;
  body: unknown;
  timeout_ms: number;
  attempts: number;
}

interface Outcome {
  status?: number;
  contentType?: string;
  content?: string;
  error?: string;
  /** Not worth another attempt: the policy refused the URL. */
  final?: boolean;
}

async function send(request: QueuedRequest): Promise<Outcome> {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return { error: `unsupported URL ${request.url}`, final: true };
  }
  for (const [name, value] of Object.entries(request.params ?? {}))
    url.searchParams.append(name, String(value));
  const headers = Object.fromEntries(Object.entries(request.headers ?? {}).map(([k, v]) => [k, String(v)]));
  if (request.method === "POST" && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
    headers["content-type"] = "application/json";
  }
  try {
    const res = await fetchOutbound(url.href, {
      method: request.method,
      headers,
      body: request.method === "POST" ? JSON.stringify(request.body) : undefined,
      allowHttp: true,
      timeoutMs: Math.min(Math.max(request.timeout_ms, 1), MAX_TIMEOUT_MS),
      maxBytes: CONTENT_LIMIT,
      truncate: true,
    });
    return { status: res.status, contentType: res.contentType ?? undefined, content: res.text };
  } catch (e) {
    return { error: (e as Error).message, final: e instanceof OutboundError && e.refused };
  }
}

/** Sends what is due in one project; answers how many requests it handled. */
async function dispatchDue(project: ProjectRuntime): Promise<number> {
  return withAdminTransaction(project.adminPool, async (c: PoolClient) => {
    // Whatever the project attached to these tables (or casts it made) runs without superuser rights.
    await c.query("set local role strata_webhook_sender; set local search_path = pg_catalog, pg_temp");
    const { rows } = await c.query<QueuedRequest>(
      `select id::text, method, url, headers, params, body, timeout_ms, attempts
         from supabase_functions.http_request_queue where next_attempt_at <= now()
        order by id limit $1 for update skip locked`,
      [BATCH],
    );
    await Promise.all(
      rows.map(async (request) => {
        const outcome = await send(request);
        const attempts = request.attempts + 1;
        const failed = outcome.error !== undefined || (outcome.status ?? 0) >= 500;
        if (failed && !outcome.final && attempts < MAX_ATTEMPTS) {
          await c.query(
            `update supabase_functions.http_request_queue
                set attempts = $2, next_attempt_at = now() + make_interval(secs => $3) where id = $1`,
            [request.id, attempts, RETRY_DELAYS_S[attempts - 1] ?? 30],
          );
          return;
        }
        await c.query(
          `insert into supabase_functions.http_responses (id, status_code, content_type, content, error_msg, attempts)
           values ($1, $2, $3, $4, $5, $6)
           on conflict (id) do update set status_code = excluded.status_code, content = excluded.content,
             content_type = excluded.content_type, error_msg = excluded.error_msg, attempts = excluded.attempts`,
          [
            request.id,
            outcome.status ?? null,
            outcome.contentType ?? null,
            outcome.content ?? null,
            outcome.error ?? null,
            attempts,
          ],
        );
        await c.query("delete from supabase_functions.http_request_queue where id = $1", [request.id]);
      }),
    );
    return rows.length;
  });
}

export class WebhookDispatcher {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** Each project's dispatch, on its own: a project whose endpoints are slow holds up no other. */
  private readonly dispatching = new Map<string, Promise<void>>();

  constructor(private readonly ctx: AppContext) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.tick().finally(() => (this.running = undefined));
    }, POLL_MS);
    this.timer.unref();
  }

  /** Projects whose webhooks are on (`POST .../database/webhooks/enable`). */
  private async enabledProjects(): Promise<string[]> {
    const { rows } = await this.ctx.platformPool.query<{ project_ref: string }>(
      `select s.project_ref from platform.project_settings s join platform.projects p on p.ref = s.project_ref
        where s.kind = 'webhooks' and (s.value->>'enabled')::boolean and p.status = 'ACTIVE_HEALTHY'`,
    );
    return rows.map((r) => r.project_ref);
  }

  /** The enabled projects, read from the control plane at most every REFRESH_MS (or when `refresh()` asks). */
  private enabled: { refs: string[]; at: number } | undefined;

  /** Webhooks were just enabled somewhere: read the list again on the next tick. */
  refresh(): void {
    this.enabled = undefined;
  }

  private async tick(): Promise<void> {
    if (!this.enabled || Date.now() - this.enabled.at > REFRESH_MS) {
      try {
        this.enabled = { refs: await this.enabledProjects(), at: Date.now() };
      } catch {
        return; // the control plane is away; the next tick tries again
      }
    }
    for (const ref of this.enabled.refs) {
      if (this.dispatching.has(ref)) continue;
      this.dispatching.set(
        ref,
        this.dispatchProject(ref).finally(() => this.dispatching.delete(ref)),
      );
    }
  }

  /** Sends what is due in `ref` until its queue has nothing more due. */
  private async dispatchProject(ref: string): Promise<void> {
    try {
      const project = await this.ctx.registry.get(ref);
      if (project) while ((await dispatchDue(project)) === BATCH);
    } catch (e) {
      // The project dropped supabase_functions: nothing to send until webhooks are enabled again.
      if ((e as { code?: string }).code === "42P01") return;
      this.ctx.log.warn({ ref, err: (e as Error).message }, "webhooks: dispatch failed");
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
    await Promise.all(this.dispatching.values());
  }
}
