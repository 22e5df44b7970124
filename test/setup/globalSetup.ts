import { chmodSync, mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { applyBootstrap } from "../../src/db/bootstrap";
import { startEmbeddedPostgres } from "../../src/db/embedded";
import { withDatabase } from "../../src/db/urls";
import { ensureChromium } from "./chromium";
import { ensureHaproxy } from "./haproxy";
import { ensurePgCron } from "./pgCron";

export const TEMPLATE_DB = "strata_test_template";
/** The control plane's database of every test server is cloned from this one (see test/helpers/db.ts). */
export const CONTROL_TEMPLATE_DB = "strata_test_template_control";

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

/**
 * One PostgreSQL for the whole run: the embedded one (fresh, in a temporary directory) or DATABASE_URL's
 * cluster. A bootstrapped template database is made once; every test file clones it (test/helpers/db.ts),
 * so files are independent and run in parallel without racing on cluster-wide roles.
 */
export default async function globalSetup(): Promise<void> {
  ensureChromium();
  ensureHaproxy();
  ensurePgCron();
  // The run's temporary directory: every test's (test/helpers/tempDir.ts) is made in it, globalTeardown removes it.
  process.env.STRATA_TEST_TMP = mkdtempSync(path.join(os.tmpdir(), "strata-run-"));
  // Passable by the OS user PostgreSQL runs as (when the tests run as root), as the system's own is.
  chmodSync(process.env.STRATA_TEST_TMP, 0o711);
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    const dir = mkdtempSync(path.join(process.env.STRATA_TEST_TMP, "cluster-"));
    const db = await startEmbeddedPostgres(dir, await freePort());
    (globalThis as any).__strataEmbedded = db;
    adminUrl = db.url;
  }
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  for (const db of [TEMPLATE_DB, CONTROL_TEMPLATE_DB]) {
    await client.query(`drop database if exists ${db} with (force)`);
    await client.query(`create database ${db}`);
  }
  await client.end();
  await applyBootstrap(withDatabase(adminUrl, TEMPLATE_DB), ["project"]);
  await applyBootstrap(withDatabase(adminUrl, CONTROL_TEMPLATE_DB), ["platform"]);
  process.env.STRATA_TEST_ADMIN_URL = adminUrl;
}
