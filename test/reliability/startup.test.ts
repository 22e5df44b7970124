import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { createTestDatabase, dropTestDatabase } from "../helpers/db";
import { TEST_AUTHENTICATOR_PASSWORD, TEST_KEK } from "../helpers/server";

/** `npm start` as a user runs it, in situations where it cannot start: one line naming the cause, exit 1. */
async function start(env: Record<string, string>): Promise<{ code: number; lastLine: string }> {
  const result = await promisify(execFile)(
    path.resolve("node_modules/.bin/node"),
    ["--import", "tsx", "src/cli/main.ts", "start"],
    {
      env: {
        ...process.env,
        STRATA_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "strata-startup-")),
        STRATA_KEK: TEST_KEK,
        // The test cluster's servers share one authenticator role: a start-up that set another password
        // would fail every other running test server's new connections.
        AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
        LOG_LEVEL: "silent",
        GRAPHILE_ENV: "production",
        ...env,
      },
      timeout: 60_000,
    },
  ).then(
    () => ({ code: 0, stderr: "" }),
    (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
  );
  const lines = result.stderr.trim().split("\n");
  return { code: result.code, lastLine: lines[lines.length - 1] };
}

describe("Start-up failures", () => {
  it("names an invalid environment value", async () => {
    expect(await start({ PORT: "not-a-port" })).toEqual({
      code: 1,
      lastLine: expect.stringMatching(/^Invalid configuration: PORT must be a port number/),
    });
  });

  it("names an unreachable database and what to check", async () => {
    const { code, lastLine } = await start({ DATABASE_URL: "postgres://postgres:x@127.0.0.1:1/postgres" });
    expect(code).toBe(1);
    expect(lastLine).toMatch(
      /^Cannot connect to the database at DATABASE_URL: .*ECONNREFUSED.*host and port/,
    );
  });

  it("names a wrong password", async () => {
    const url = new URL(process.env.STRATA_TEST_ADMIN_URL!);
    url.password = "certainly-not-the-password";
    const { code, lastLine } = await start({ DATABASE_URL: url.toString() });
    expect(code).toBe(1);
    expect(lastLine).toMatch(/password authentication failed.*check the user and password in DATABASE_URL/);
    expect(lastLine).not.toContain("certainly-not-the-password");
  });

  it("names a port that is taken", async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, "0.0.0.0", () => r()));
    const port = (taken.address() as { port: number }).port;
    const database = await createTestDatabase();
    try {
      const { code, lastLine } = await start({ DATABASE_URL: database, PORT: String(port) });
      expect(code).toBe(1);
      expect(lastLine).toMatch(new RegExp(`^Cannot listen on port ${port}`));
    } finally {
      taken.close();
      await dropTestDatabase(database);
    }
  });
});
