import { request } from "undici";
import type { AppContext } from "../../context";

/**
 * A project's calls to its own API (the docs' recipe: a cron job posts to the project's
 * `/functions/v1/<name>` with net.http_post). Its host, `<ref>.<STRATA_DOMAIN>`, names this very Strata, which
 * the outbound policy refuses as one of this machine's addresses (or which does not resolve at all, as
 * `*.localhost`): such a request goes to Strata's own listener instead, with the project's host, to the data
 * routes the internet reaches at that host and nothing else, as edge functions reach SUPABASE_URL. Another
 * project's host, or another path, goes out under the outbound policy like any other URL.
 */

const DATA_ROUTES = [
  "/rest/v1/",
  "/graphql/v1",
  "/storage/v1/",
  "/functions/v1/",
  "/auth/v1/",
  "/realtime/v1/",
];

/** The path and query of `url` when it is one of the project's own data routes. */
export function ownApiTarget(ctx: AppContext, ref: string, url: URL): string | undefined {
  if (url.hostname.toLowerCase() !== `${ref}.${ctx.config.domain}`) return undefined;
  if (!DATA_ROUTES.some((route) => url.pathname.startsWith(route))) return undefined;
  return url.pathname + url.search;
}

export interface OwnApiAnswer {
  status: number;
  contentType: string | null;
  headers: Record<string, string>;
  text: string;
}

export class OwnApiError extends Error {}

/** Sends one request to the project's own API on this Strata; the body is read up to `maxBytes`. */
export async function callOwnApi(
  ctx: AppContext,
  ref: string,
  target: string,
  req: {
    method: string;
    headers: Record<string, string>;
    body?: string;
    timeoutMs: number;
    maxBytes: number;
  },
): Promise<OwnApiAnswer> {
  const headers = Object.fromEntries(
    Object.entries(req.headers).filter(([name]) => name.toLowerCase() !== "host"),
  );
  const signal = AbortSignal.timeout(req.timeoutMs);
  try {
    const res = await request(`http://127.0.0.1:${ctx.config.port}${target}`, {
      method: req.method as "GET",
      headers: { ...headers, host: `${ref}.${ctx.config.domain}` },
      body: req.body,
      signal,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > req.maxBytes) {
        res.body.destroy();
        throw new OwnApiError(`the answer is larger than ${req.maxBytes} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    const answerHeaders = Object.fromEntries(
      Object.entries(res.headers).map(([name, value]) => [
        name,
        Array.isArray(value) ? value.join(", ") : `${value}`,
      ]),
    );
    return {
      status: res.statusCode,
      contentType: answerHeaders["content-type"] ?? null,
      headers: answerHeaders,
      text: Buffer.concat(chunks).toString("utf8"),
    };
  } catch (e) {
    if (e instanceof OwnApiError) throw e;
    if (signal.aborted) throw new OwnApiError(`Timeout of ${req.timeoutMs} ms reached`);
    throw new OwnApiError((e as Error).message);
  }
}
