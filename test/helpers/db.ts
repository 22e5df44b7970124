import { randomBytes } from "node:crypto";
import pg from "pg";
import { withDatabase } from "../../src/db/urls";

const TEMPLATE_DB = "strata_test_template";
const CONTROL_TEMPLATE_DB = "strata_test_template_control";

export function adminUrl(): string {
  const url = process.env.STRATA_TEST_ADMIN_URL;
  if (!url) throw new Error("STRATA_TEST_ADMIN_URL is unset: run the tests through jest (npm test)");
  return url;
}

/** Runs one statement as the cluster's superuser on `url` (default: the cluster's admin database). */
export async function adminQuery(
  sql: string,
  params: unknown[] = [],
  url = adminUrl(),
): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(sql, params);
  } finally {
    await client.end();
  }
}

async function cloneDatabase(name: string, template: string): Promise<void> {
  // CREATE DATABASE ... TEMPLATE needs the template to have no other sessions; retry briefly if busy.
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(`create database ${name} template ${template}`);
      return;
    } catch (e) {
      if (attempt > 20 || !/being accessed by other users/.test((e as Error).message)) throw e;
      await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
    }
  }
}

/**
 * A fresh database cloned from the bootstrapped template, with its control-plane database beside it (as a
 * server makes at its first start, but already bootstrapped); returns the main database's superuser URL.
 * With `withControl: false` the server makes its control database itself.
 */
export async function createTestDatabase(opts: { withControl?: boolean } = {}): Promise<string> {
  const name = "strata_test_" + randomBytes(6).toString("hex");
  await cloneDatabase(name, TEMPLATE_DB);
  if (opts.withControl !== false) await cloneDatabase(`${name}_control`, CONTROL_TEMPLATE_DB);
  return withDatabase(adminUrl(), name);
}

/** Superuser URL of the control-plane database of the server running on `url`'s database. */
export function controlUrlOf(url: string): string {
  return withDatabase(url, `${new URL(url).pathname.slice(1)}_control`);
}

export async function dropTestDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  await adminQuery(`drop database if exists ${name} with (force)`);
  await adminQuery(`drop database if exists ${name}_control with (force)`);
}
