import { createServer, type IncomingMessage, type RequestListener, type ServerOptions } from "node:http";
import type { AppContext } from "../context";

/** Strata's public HTTP handler, as the server listens with it. */
export interface PublicApi {
  listener: RequestListener;
  serverOptions: ServerOptions;
}

/** A running channel: closing it stops serving its socket. */
export interface ApiChannel {
  listening: Promise<void>;
  close(): void;
}

/** The path and query of an absolute-form request target. */
function pathOf(target: string): string {
  try {
    const url = new URL(target);
    return url.pathname + url.search;
  } catch {
    return "/";
  }
}

/**
 * A function's way to its own project's API (SUPABASE_URL). The network rules refuse this machine's
 * addresses, where Strata listens, so each worker gets Strata's public handler on a unix socket in its
 * scratch directory instead; the bootstrap sends requests for SUPABASE_URL there (through a proxy client,
 * so the request target arrives in absolute form). Every request is pinned to the project: its target
 * becomes a path and its Host the project's own, so the socket reaches exactly what the internet reaches at
 * that host, nothing more. Websocket upgrades (realtime) are pinned the same way.
 */
export function openApiChannel(ctx: AppContext, api: PublicApi, ref: string, socketPath: string): ApiChannel {
  const host = `${ref}.${ctx.config.domain}`;
  const pin = (req: IncomingMessage) => {
    if (!req.url?.startsWith("/")) req.url = pathOf(req.url ?? "");
    req.headers.host = host;
  };
  const server = createServer(api.serverOptions, (req, res) => {
    pin(req);
    api.listener(req, res);
  });
  if (ctx.realtime) {
    // Registered before realtime's own listener, which then sees the pinned request.
    server.on("upgrade", pin);
    ctx.realtime.attach(server);
  }
  const listening = new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, resolve);
  });
  return {
    listening,
    close() {
      server.close();
      server.closeAllConnections();
    },
  };
}
