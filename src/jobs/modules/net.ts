import type { PoolClient } from "pg";
import type { AppContext } from "../../context";
import { withAdminTransaction } from "../../db/transaction";
import { fetchOutbound } from "../../net/outbound";
import type { ProjectRuntime } from "../../projects/runtime";
import { callOwnApi, ownApiTarget } from "./ownApi";

/**
 * pg_net's worker (sql/project/720_net.sql): takes the requests committed to `net.http_request_queue` (each once
 * across every Strata node: the claim deletes them, `for update skip locked`), sends them, and records each
 * answer (status, headers, body) or why there is none (`error_msg`, `timed_out`) in `net._http_response`, where
 * answers older than six hours are removed, as pg_net's ttl does. A request is lost if its node stops while
 * sending it, as pg_net's are when its server restarts. Requests go out under the outbound policy (public
 * addresses only, http or https, no redirects followed); one to the project's own API is served by this Strata
 * (ownApi.ts). The queue is the tenant's to fill: it is read and written as `strata_net`, never as the superuser.
 */

const BATCH = 50;
/** The most of an answer's body that is kept. */
const CONTENT_LIMIT = 1024 * 1024;
/** A request's own timeout (`timeout_milliseconds`, 5000 by default) is capped. */
const MAX_TIMEOUT_MS = 5 * 60_000;
const TTL = "6 hours";

interface QueuedRequest {
  id: string;
  method: string;
  url: string;
  headers: Record<string, unknown> | null;
  body: Buffer | null;
  timeout_milliseconds: number;
}

interface Response {
  id: string;
  status_code: number | null;
  content_type: string | null;
  headers: Record<string, string> | null;
  content: string | null;
  timed_out: boolean;
  error_msg: string | null;
}

/** Runs `work` as strata_net on the project's database. */
function asNetWorker<T>(project: ProjectRuntime, work: (c: PoolClient) => Promise<T>): Promise<T> {
  return withAdminTransaction(project.adminPool, async (c: PoolClient) => {
    await c.query("set local role strata_net; set local search_path = pg_catalog, pg_temp");
    return work(c);
  });
}

async function send(ctx: AppContext, ref: string, request: QueuedRequest): Promise<Response> {
  const timeoutMs = Math.min(Math.max(request.timeout_milliseconds, 1), MAX_TIMEOUT_MS);
  const headers = Object.fromEntries(
    Object.entries(request.headers ?? {}).map(([name, value]) => [
      name,
      typeof value === "string" ? value : JSON.stringify(value),
    ]),
  );
  const method = request.method.toUpperCase();
  const body = request.body === null ? undefined : request.body.toString("utf8");
  const started = Date.now();
  try {
    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      throw new Error(`URL using bad/illegal format or missing URL: ${request.url}`);
    }
    const target = ownApiTarget(ctx, ref, url);
    const req = { method, headers, body, timeoutMs, maxBytes: CONTENT_LIMIT };
    const answer = target
      ? await callOwnApi(ctx, ref, target, req)
      : await fetchOutbound(url.href, { ...req, allowHttp: true });
    return {
      id: request.id,
      status_code: answer.status,
      content_type: answer.contentType,
      headers: answer.headers,
      // text and jsonb hold no NUL character.
      content: answer.text.replaceAll("\0", ""),
      timed_out: false,
      error_msg: null,
    };
  } catch (e) {
    return {
      id: request.id,
      status_code: null,
      content_type: null,
      headers: null,
      content: null,
      timed_out: Date.now() - started >= timeoutMs,
      error_msg: (e as Error).message,
    };
  }
}

/** Sends what is queued in the project, a batch at a time; answers how many requests it took. */
async function sendQueued(ctx: AppContext, project: ProjectRuntime): Promise<number> {
  const { rows } = await asNetWorker(project, (c) =>
    c.query<QueuedRequest>(
      `delete from net.http_request_queue q
        where q.id in (select id from net.http_request_queue order by id limit $1 for update skip locked)
        returning q.id::text, q.method, q.url, q.headers, q.body, q.timeout_milliseconds`,
      [BATCH],
    ),
  );
  if (!rows.length) return 0;
  const responses = await Promise.all(rows.map((request) => send(ctx, project.ref, request)));
  await asNetWorker(project, (c) =>
    c.query(
      `insert into net._http_response (id, status_code, content_type, headers, content, timed_out, error_msg)
       select r.id, r.status_code, r.content_type, r.headers, r.content, r.timed_out, r.error_msg
         from jsonb_to_recordset($1::jsonb) as r(id bigint, status_code integer, content_type text, headers jsonb,
                                                  content text, timed_out boolean, error_msg text)`,
      [JSON.stringify(responses)],
    ),
  );
  return rows.length;
}

/** Answers older than the ttl go. */
export function pruneResponses(project: ProjectRuntime): Promise<unknown> {
  return asNetWorker(project, (c) =>
    c.query(`delete from net._http_response where created < now() - interval '${TTL}'`),
  );
}

/** Sends what `project` queued until its queue is empty; answers whether it sent anything. */
export async function drainQueue(ctx: AppContext, project: ProjectRuntime): Promise<boolean> {
  let sent = 0;
  for (;;) {
    const n = await sendQueued(ctx, project);
    sent += n;
    if (n < BATCH) return sent > 0;
  }
}
