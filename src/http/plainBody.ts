import { Readable } from "node:stream";
import type { Request, RequestHandler } from "express";

/**
 * Body parsers for the data path that read the common request themselves and leave every other one to
 * `parser` (express.json, express.raw), so every answer stays body-parser's: a body with a `Content-Length`
 * within `limit`, no `Content-Encoding` or `Transfer-Encoding` (and, for JSON, `Content-Type:
 * application/json` in UTF-8) is read here, without body-parser's per-request content-type parsing, decoder and
 * stream bookkeeping; any other body (another type or charset, compressed, chunked, too large) goes to `parser`
 * as it came.
 */

/** JSON (express.json's strict mode); a body that does not parse is replayed into `parser`, which answers it. */
export function jsonBody(parser: RequestHandler, limit: number): RequestHandler {
  return (req, res, next) => {
    if (!isPlainJson(req) || !isPlain(req, limit)) return parser(req, res, next);
    readWhole(req, (err, body) => {
      if (err) return next(err);
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
    });
  };
}

/** The body's bytes, of any type (express.raw with `type: () => true`). */
export function rawBody(parser: RequestHandler, limit: number): RequestHandler {
  return (req, res, next) => {
    if (!isPlain(req, limit)) return parser(req, res, next);
    readWhole(req, (err, body) => {
      if (err) return next(err);
      req.body = body;
      next();
    });
  };
}

/** Reads a request's whole body, then calls `done` once with it or with the stream's error. */
function readWhole(req: Request, done: (err: unknown, body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  let received = 0;
  const onData = (chunk: Buffer) => {
    chunks.push(chunk);
    received += chunk.length;
  };
  const finish = (err?: unknown) => {
    req.off("data", onData);
    req.off("end", onEnd);
    req.off("error", finish);
    req.off("aborted", onAborted);
    done(err, err ? Buffer.alloc(0) : Buffer.concat(chunks, received));
  };
  const onEnd = () => finish();
  const onAborted = () =>
    finish(Object.assign(new Error("request aborted"), { status: 400, type: "request.aborted" }));
  req.on("data", onData);
  req.on("end", onEnd);
  req.on("error", finish);
  req.on("aborted", onAborted);
}

/** The types jsonBody reads itself: JSON, as UTF-8 (the default) or said so. */
const PLAIN_JSON_TYPES = new Set([
  "application/json",
  "application/json; charset=utf-8",
  "application/json;charset=utf-8",
]);

function isPlainJson(req: Request): boolean {
  const type = req.headers["content-type"];
  return type !== undefined && PLAIN_JSON_TYPES.has(type.toLowerCase());
}

/**
 * Whether the body is one these parsers read themselves: its length given and within `limit`, not compressed
 * or chunked, and not read already (by another parser) or ended.
 */
function isPlain(req: Request, limit: number): boolean {
  const { headers } = req;
  const length = headers["content-length"];
  if (length === undefined || !/^\d+$/.test(length)) return false;
  if (headers["content-encoding"] !== undefined || headers["transfer-encoding"] !== undefined) return false;
  if (req.body !== undefined || req.complete || req.readableEnded) return false;
  return Number(length) <= limit;
}

/**
 * The body as express.json's strict mode parses it (an object or an array; an empty body is `{}`), or
 * undefined when it does not parse.
 */
function parseJsonObject(body: Buffer): unknown {
  const text = body.toString("utf8");
  if (text.length === 0) return {};
  // The first character after JSON's whitespace (without copying the text as trimStart would).
  let i = 0;
  while (i < text.length && (text[i] === " " || text[i] === "\n" || text[i] === "\r" || text[i] === "\t"))
    i++;
  if (text[i] !== "{" && text[i] !== "[") return undefined;
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
