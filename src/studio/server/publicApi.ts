import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http";
import type { Request, Response } from "express";
import type { AppContext } from "../../context";

/**
 * The dashboard is a client of Strata's public Management API: its calls travel over loopback to this
 * server's own listener, with the session's token as `Authorization: Bearer` and nothing else added, so the
 * API's access checks, rate limits and logs treat them as any other client's.
 */

/** What a dashboard request may pass on: the body's type and length, and what answer it accepts. */
const FORWARDED_REQUEST_HEADERS = ["content-type", "content-length", "content-encoding", "accept"];

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "trailer",
  "set-cookie",
]);

function requestTo(ctx: AppContext, method: string, path: string, headers: OutgoingHttpHeaders) {
  return http.request({ host: "127.0.0.1", port: ctx.config.port, method, path, headers });
}

/** One JSON call to the Management API as `token`: its status and parsed body. */
export function callPublicApi(
  ctx: AppContext,
  method: string,
  path: string,
  token: string,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = requestTo(ctx, method, path, {
      authorization: `Bearer ${token}`,
      accept: "application/json",
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = { message: text };
        }
        resolve({ status: res.statusCode ?? 502, body });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

function answerHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name)));
}

/** Streams `req` to the Management API at `path` as `token`, and the API's answer back, status and body as they are. */
export function forwardToPublicApi(
  ctx: AppContext,
  req: Request,
  res: Response,
  path: string,
  token: string,
) {
  const headers: OutgoingHttpHeaders = { authorization: `Bearer ${token}` };
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = req.headers[name];
    if (value !== undefined) headers[name] = value;
  }
  const upstream = requestTo(ctx, req.method, path, headers);
  upstream.on("response", (answer) => {
    res.writeHead(answer.statusCode ?? 502, answerHeaders(answer.headers));
    answer.pipe(res);
  });
  upstream.on("error", () => {
    if (res.headersSent) res.destroy();
    else res.status(502).json({ message: "The Management API did not answer" });
  });
  // The browser went away: so does the API's side of the request.
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}
