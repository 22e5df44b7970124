import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import tls from "node:tls";
import type { AppContext } from "../context";
import { selfSignedCertificate } from "../db/certificate";
import { startDbListener, type DbListener } from "./listener";

declare module "../context" {
  interface AppContext {
    /** Where clients reach the database listener (the pooler connection strings): absent while it is off. */
    dbListener?: { host: string; port: number };
  }
}

/** A self-signed certificate for the listener's names, made once in `dir` (the key readable by its owner only). */
async function ensureCertificate(dir: string, domain: string): Promise<{ cert: Buffer; key: Buffer }> {
  const cert = path.join(dir, "server.crt");
  const key = path.join(dir, "server.key");
  if (!existsSync(cert) || !existsSync(key)) {
    const pems = await selfSignedCertificate([domain, `*.${domain}`]);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(key, pems.key, { mode: 0o600 });
    writeFileSync(cert, pems.cert, { mode: 0o644 });
  }
  return { cert: readFileSync(cert), key: readFileSync(key) };
}

/**
 * The listener's TLS certificate: the operator's (STRATA_DB_TLS_CERT/KEY, e.g. a wildcard for `*.<domain>`), or a
 * self-signed one made once in the data directory. Clients that do not verify the server (the CLI, psql's default
 * `sslmode=prefer`) accept either; only a verifying client (`verify-full`) needs the operator's.
 */
export async function listenerCertificate(ctx: AppContext): Promise<{ cert: Buffer; key: Buffer }> {
  const { tlsCert, tlsKey } = ctx.config.dbListener;
  if (tlsCert && tlsKey) return { cert: readFileSync(tlsCert), key: readFileSync(tlsKey) };
  return ensureCertificate(path.join(ctx.config.dataDir, "db-listener"), ctx.config.domain);
}

/**
 * Starts the database listener when configured. A port set by STRATA_DB_PORT that is taken fails the start; the
 * default port taken (a PostgreSQL of the machine's own) only leaves the listener off, with a warning.
 */
export async function openDbListener(ctx: AppContext): Promise<DbListener | undefined> {
  const { port, portSet, listen, host } = ctx.config.dbListener;
  if (port === undefined) return undefined;
  try {
    const listener = await startDbListener(ctx, {
      port,
      host: listen,
      secureContext: tls.createSecureContext(await listenerCertificate(ctx)),
    });
    ctx.dbListener = { host, port: listener.port };
    ctx.log.info({ address: `${listen}:${listener.port}`, host }, "database listener started");
    return listener;
  } catch (e) {
    if (portSet) throw e;
    ctx.log.warn(
      { err: (e as Error).message },
      `the database listener is off: port ${port} is not free (set STRATA_DB_PORT to another port)`,
    );
    return undefined;
  }
}
