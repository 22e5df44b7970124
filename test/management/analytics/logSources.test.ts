import { rmSync } from "node:fs";
import { createServer } from "node:net";
import { startStrata, type RunningStrata } from "../../../src/app";
import { loadConfig } from "../../../src/config";
import { createLogger } from "../../../src/log";
import { TEST_AUTHENTICATOR_PASSWORD, TEST_MANAGEMENT_TOKEN } from "../../helpers/server";
import { testTempDir } from "../../helpers/tempDir";

/**
 * auth_logs, postgres_logs and function_edge_logs. postgres_logs is read from the log of a cluster Strata
 * runs, so this file runs Strata with its own embedded PostgreSQL.
 */

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

describe("log sources auth_logs, postgres_logs and function_edge_logs", () => {
  let dir: string;
  let strata: RunningStrata;
  let base: string;
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method,
      headers: { Authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };
  const logs = (sql: string) => {
    const end = new Date(Date.now() + 60_000).toISOString();
    const start = new Date(Date.now() - 600_000).toISOString();
    const q = new URLSearchParams({ sql, iso_timestamp_start: start, iso_timestamp_end: end });
    return api("GET", `/v1/projects/${strata.info.ref}/analytics/endpoints/logs?${q}`);
  };
  /** Asks until the query answers rows (events are written once a second; log lines arrive as they are read). */
  async function rowsOf(sql: string): Promise<any[]> {
    for (let i = 0; i < 100; i++) {
      const r = await logs(sql);
      expect(r.status).toBe(200);
      if (r.body.result.length) return r.body.result;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`no rows for ${sql}`);
  }

  beforeAll(async () => {
    dir = testTempDir("strata-logsources-");
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(await freePort()),
        STRATA_DATA_DIR: dir,
        MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        STRATA_KEK: "test-key-encryption-key-of-at-least-32-chars",
        MANAGEMENT_RATE_LIMIT: "100000",
      }),
      createLogger("silent"),
    );
    base = `http://127.0.0.1:${strata.port}`;
  }, 120_000);
  afterAll(async () => {
    await strata?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("records a failing sign-in and a sign-up in auth_logs, without the password", async () => {
    const auth = (p: string, body: unknown) =>
      fetch(`${base}/auth/v1${p}`, {
        method: "POST",
        headers: { apikey: strata.info.anon_key, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    await api("PATCH", `/v1/projects/${strata.info.ref}/config/auth`, { mailer_autoconfirm: true });
    expect(
      (await auth("/signup", { email: "logged@example.com", password: "right-password-1" })).status,
    ).toBe(200);
    const failed = await auth("/token?grant_type=password", {
      email: "logged@example.com",
      password: "wrong-password-1",
    });
    expect(failed.status).toBe(400);

    const rows = await rowsOf(
      "select event_message, metadata from auth_logs where metadata->>'action' = 'login_failed'",
    );
    expect(rows[0].metadata).toMatchObject({
      action: "login_failed",
      status: 400,
      error_code: "invalid_credentials",
      path: "/token",
      grant_type: "password",
      level: "warning",
    });
    const signup = await rowsOf("select metadata from auth_logs where metadata->>'action' = 'user_signedup'");
    expect(signup[0].metadata.user_id).toMatch(/^[0-9a-f-]{36}$/);
    const all = await rowsOf("select event_message from auth_logs");
    expect(JSON.stringify(all)).not.toContain("password-1");
  });

  it("records a SQL error of the project's database in postgres_logs", async () => {
    const failed = await api("POST", `/v1/projects/${strata.info.ref}/database/query`, {
      query: "select * from public.no_such_table_for_logs",
    });
    expect(failed.status).toBeGreaterThanOrEqual(400);
    const rows = await rowsOf(
      "select event_message, metadata from postgres_logs where event_message like '%no_such_table_for_logs%' order by id",
    );
    // The error, then the statement that caused it, as the server logs them.
    expect(rows.map((r) => r.metadata.parsed.error_severity)).toEqual(["ERROR", "STATEMENT"]);
    expect(rows[0].event_message).toContain('relation "public.no_such_table_for_logs" does not exist');
    expect(rows[1].event_message).toBe("select * from public.no_such_table_for_logs");
    expect(rows[0].metadata.parsed).toMatchObject({
      error_severity: "ERROR",
      database_name: new URL(strata.ctx.adminUrl).pathname.slice(1),
    });
  });

  it("lets the query read the log views of its own project only", async () => {
    expect((await logs("select count(*) from function_edge_logs")).body.result).toEqual([{ count: "0" }]);
    for (const sql of ["select * from platform.log_events", "select * from logs.log_events_raw"]) {
      const r = await logs(sql);
      expect(r.status).toBe(400);
      expect(typeof r.body.message).toBe("string");
    }
  });
});
