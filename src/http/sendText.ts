import type { ServerResponse } from "node:http";

/**
 * Answers with a text body: what Express' `res.type(type).send(body)` writes for a data response (the type
 * with `charset=utf-8`, Content-Length), without its per-call content-type parsing and freshness checks,
 * which the data routes never need (they send no ETag or Last-Modified).
 */
export function sendText(res: ServerResponse, status: number, type: string, body: string): void {
  res.statusCode = status;
  res.setHeader("Content-Type", /;\s*charset=/i.test(type) ? type : `${type}; charset=utf-8`);
  res.setHeader("Content-Length", Buffer.byteLength(body));
  res.end(body);
}
