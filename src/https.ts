import { readFileSync } from "node:fs";
import type { RequestListener, ServerOptions } from "node:http";
import { createServer, type Server } from "node:https";
import type { AppContext } from "./context";
import { listenerCertificate } from "./pooler/start";

/**
 * The optional HTTPS listener (STRATA_HTTPS_PORT): exactly the app PORT serves, for clients that reach a project
 * at `https://<ref>.<domain>` (the platform's CLI: `storage ls|cp|mv|rm`, the version probes of `link`). Its
 * certificate is the operator's (STRATA_TLS_CERT/KEY, e.g. a wildcard for `*.<domain>`) or the database
 * listener's (its own, or the self-signed one of the data directory, made for `<domain>` and `*.<domain>`).
 */
export async function openHttpsServer(
  ctx: AppContext,
  serverOptions: ServerOptions,
  listener: RequestListener,
): Promise<Server | undefined> {
  const { port, tlsCert, tlsKey } = ctx.config.https;
  if (port === undefined) return undefined;
  const certificate =
    tlsCert && tlsKey
      ? { cert: readFileSync(tlsCert), key: readFileSync(tlsKey) }
      : await listenerCertificate(ctx);
  const server = createServer({ ...serverOptions, ...certificate }, listener);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server;
}
