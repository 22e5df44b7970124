import http, {
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type RequestListener,
  type Server,
} from "node:http";
import type { Socket } from "node:net";
import { duplexPair } from "node:stream";
import type { Request, Response } from "express";

/**
 * The dashboard is a client of Strata's public Management API. Its calls are dispatched in process, with no
 * network address: each one is an HTTP request written on one end of a socket pair whose other end is handed
 * to a server that never listens, serving the very Express app the API's listener serves. The call then goes
 * through everything the API's own clients go through (request log, metrics, caller identification, rate
 * limits, access checks), with the session's token as `Authorization: Bearer`, the browser's Host, and the
 * browser's address as the socket's (what the API counts an unidentified caller by).
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

/** The server that serves an app's in-process calls (one per app; it never listens). */
const inProcessServers = new WeakMap<RequestListener, Server>();

function serverOf(app: RequestListener): Server {
  let server = inProcessServers.get(app);
  if (!server) {
    server = http.createServer(app);
    inProcessServers.set(app, server);
  }
  return server;
}

/** One end of a new socket pair, the other end served by `app` as a connection from `remoteAddress`. */
function connectionTo(app: RequestListener, remoteAddress: string | undefined): Socket {
  const [client, served] = duplexPair();
  Object.defineProperty(served, "remoteAddress", { value: remoteAddress });
  // A pair's sides do not end each other: the caller going away ends the served request too.
  client.once("close", () => served.destroy());
  serverOf(app).emit("connection", served);
  // http.request writes on any duplex stream; its types name a net.Socket.
  return client as unknown as Socket;
}

/** A request to the Management API of the app serving `from`, as the browser that sent `from`. */
function requestTo(from: Request, method: string, path: string, headers: OutgoingHttpHeaders) {
  const app = from.app as unknown as RequestListener;
  return http.request({
    method,
    path,
    headers: { ...headers, host: from.headers.host },
    // The browser's address as the app resolved it (behind a trusted proxy, the forwarded one): the call
    // carries no X-Forwarded-For, so the Management API's limits see the browser, not the proxy.
    createConnection: () => connectionTo(app, from.ip ?? from.socket.remoteAddress),
  });
}

/** One JSON call to the Management API as `token`: its status and parsed body. */
export function callPublicApi(
  from: Request,
  method: string,
  path: string,
  token: string,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = requestTo(from, method, path, {
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
export function forwardToPublicApi(req: Request, res: Response, path: string, token: string) {
  const headers: OutgoingHttpHeaders = { authorization: `Bearer ${token}` };
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = req.headers[name];
    if (value !== undefined) headers[name] = value;
  }
  const upstream = requestTo(req, req.method, path, headers);
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
