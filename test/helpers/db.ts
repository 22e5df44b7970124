import { randomBytes } from "node:crypto";
import pg from "pg";
import { withDatabase } from "../../src/db/urls";

const TEMPLATE_DB = "strata_test_template";

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

/** A fresh database cloned from the bootstrapped template; returns its superuser URL. */
export async function createTestDatabase(): Promise<string> {
  const name = "strata_test_" + randomBytes(6).toString("hex");
  // CREATE DATABASE ... TEMPLATE needs the template to have no other sessions; retry briefly if busy.
  for (let attempt = 0; ; attempt++) {
    try {
      await adminQuery(`create database ${name} template ${TEMPLATE_DB}`);
      break;
    } catch (e) {
      if (attempt > 20 || !/being accessed by other users/.test((e as Error).message)) throw e;
      await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
    }
  }
  return withDatabase(adminUrl(), name);
}

export async function dropTestDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  await adminQuery(`drop database if exists ${name} with (force)`);
}
