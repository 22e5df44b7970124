import { Readable } from "node:stream";
import type { Request, RequestHandler } from "express";

/**
 * A JSON body parser for the data path that reads the common request itself and leaves every other one to
 * `parser` (express.json), so answers stay express.json's: a body of `Content-Type: application/json`
 * (UTF-8), no `Content-Encoding`, a `Content-Length` within `limit` is read and parsed here, without
 * body-parser's per-request content-type parsing, decoder and stream bookkeeping; any other body (another
 * type or charset, compressed, chunked, too large) goes to `parser` as it came, and a body that does not
 * parse is handed to `parser` again, replayed, so its error is exactly the one express.json gives.
 */
export function jsonBody(parser: RequestHandler, limit: number): RequestHandler {
  return (req, res, next) => {
    const length = plainJsonLength(req, limit);
    if (length === null) return parser(req, res, next);
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
    };
    const done = (err?: unknown) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", done);
      req.off("aborted", onAborted);
      if (err) return next(err);
      const body = Buffer.concat(chunks, received);
      const parsed = parseJsonObject(body);
      if (parsed === undefined) {
        // express.json decides (a byte order mark it drops, or its error), on the replayed body.
        const replay = replayed(req, body);
        return parser(replay, res, (e?: unknown) => {
          if (!e) req.body = replay.body as unknown;
          next(e);
        });
      }
      req.body = parsed;
      next();
    };
    const onEnd = () => done();
    const onAborted = () =>
      done(Object.assign(new Error("request aborted"), { status: 400, type: "request.aborted" }));
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", done);
    req.on("aborted", onAborted);
  };
}

/** The types this parser reads itself: JSON, as UTF-8 (the default) or said so. */
const PLAIN_JSON_TYPES = new Set([
  "application/json",
  "application/json; charset=utf-8",
  "application/json;charset=utf-8",
]);

/** The body's length when this parser reads it itself (see jsonBody), else null. */
function plainJsonLength(req: Request, limit: number): number | null {
  const { headers } = req;
  const type = headers["content-type"];
  const length = headers["content-length"];
  if (type === undefined || length === undefined || !/^\d+$/.test(length)) return null;
  if (headers["content-encoding"] !== undefined || headers["transfer-encoding"] !== undefined) return null;
  if (!PLAIN_JSON_TYPES.has(type.toLowerCase())) return null;
  // Read already (another parser), or not readable: express.json knows what to do.
  if (req.body !== undefined || req.complete || req.readableEnded) return null;
  const n = Number(length);
  return n <= limit ? n : null;
}

/**
 * The body as express.json's strict mode parses it (an object or an array; an empty body is `{}`), or
 * undefined when it does not parse.
 */
function parseJsonObject(body: Buffer): unknown {
  const text = body.toString("utf8");
  if (text.length === 0) return {};
  const first = text.trimStart()[0];
  if (first !== "{" && first !== "[") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The request again, its body read from `body`: what express.json reads to answer a body that does not parse
 * (it sees the same headers and an unfinished request).
 */
function replayed(req: Request, body: Buffer): Request {
  const stream = Readable.from([body], { objectMode: false });
  return Object.assign(stream, {
    headers: req.headers,
    complete: false,
    socket: req.socket,
    method: req.method,
    url: req.url,
  }) as unknown as Request;
}
