import pg from "pg";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { createLogger } from "../../src/log";
import { controlUrlOf, createTestDatabase, dropTestDatabase } from "./db";
import { testTempDir } from "./tempDir";

export interface TestServer {
  /** http://127.0.0.1:<port> */
  url: string;
  strata: RunningStrata;
  ref: string;
  anonKey: string;
  serviceKey: string;
  jwtSecret: string;
  managementToken: string;
  /** Superuser URL of the server's main database. */
  dbUrl: string;
  /** Runs SQL as superuser in the server's main database. */
  sql(text: string, params?: unknown[]): Promise<pg.QueryResult>;
  /** Runs SQL as superuser in the server's control-plane database (schema `platform`). */
  controlSql(text: string, params?: unknown[]): Promise<pg.QueryResult>;
  stop(): Promise<void>;
}

export const TEST_JWT_SECRET = "test-jwt-secret-with-at-least-32-characters";
/** Servers of one test database are nodes of one installation: they share its key-encryption key. */
/** Test databases share one cluster, hence one authenticator role: all servers must agree on its password. */
export const TEST_AUTHENTICATOR_PASSWORD = "strata-test-authenticator";
export const TEST_KEK = "test-key-encryption-key-of-at-least-32-chars";
export const TEST_MANAGEMENT_TOKEN = "sbp_" + "0123456789abcdef".repeat(2) + "01234567";

/**
 * Boots the real server on a free port against a fresh database of its own. `env` adds environment
 * variables as a user would set them.
 */
export async function startTestServer(env: Record<string, string> = {}): Promise<TestServer> {
  const dbUrl = await createTestDatabase();
  const config = loadConfig({
    DATABASE_URL: dbUrl,
    PORT: "0",
    JWT_SECRET: TEST_JWT_SECRET,
    MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
    AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
    STRATA_KEK: TEST_KEK,
    STRATA_DATA_DIR: testTempDir("strata-server-"),
    ...env,
  });
  // Server faults (5xx causes) reach the test output; everything else stays quiet unless asked for.
  const strata = await startStrata(config, createLogger(process.env.TEST_LOG_LEVEL ?? "error"));
  const pool = new pg.Pool({ connectionString: dbUrl, max: 2 });
  const controlPool = new pg.Pool({ connectionString: controlUrlOf(dbUrl), max: 2 });
  // Tests pause projects and drop databases: an idle connection ended by the server is not a failure.
  pool.on("error", () => {});
  controlPool.on("error", () => {});
  return {
    url: `http://127.0.0.1:${strata.port}`,
    strata,
    ref: strata.info.ref,
    anonKey: strata.info.anon_key,
    serviceKey: strata.info.service_role_key,
    jwtSecret: strata.info.jwt_secret,
    managementToken: strata.info.management_token!,
    dbUrl,
    sql: (text, params) => pool.query(text, params),
    controlSql: (text, params) => controlPool.query(text, params),
    async stop() {
      await pool.end();
      await controlPool.end();
      await strata.stop();
      await dropTestDatabase(dbUrl);
    },
  };
}
