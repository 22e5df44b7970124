import { execFile, execFileSync } from "node:child_process";
import { chmodSync, chownSync, mkdirSync } from "node:fs";
import { createServer, type Server } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { createTestDatabase, dropTestDatabase } from "../helpers/db";
import { TEST_AUTHENTICATOR_PASSWORD, TEST_KEK } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

/** `npm start` as a user runs it, in situations where it cannot start: one line naming the cause, exit 1. */
async function start(env: Record<string, string>): Promise<{ code: number; lastLine: string }> {
  const result = await promisify(execFile)(
    path.resolve("node_modules/.bin/node"),
    ["--import", "tsx", "src/cli/main.ts", "start"],
    {
      env: {
        ...process.env,
        STRATA_DATA_DIR: testTempDir("strata-startup-"),
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

  const asRoot = process.getuid?.() === 0;

  /** Runs a PostgreSQL program as the OS user `postgres` when this is root (PostgreSQL refuses root). */
  function asPostgres(program: string, args: string[]): void {
    const [cmd, argv] = asRoot ? ["runuser", ["-u", "postgres", "--", program, ...args]] : [program, args];
    execFileSync(cmd, argv, { stdio: "ignore", timeout: 60_000 });
  }

  /** A real PostgreSQL 13 cluster (binaries from the `postgres-13` dev dependency), made in `dir/pgdata`. */
  function oldCluster(): { dir: string; pgdata: string; bin: string } {
    const bin = path.resolve("node_modules/postgres-13/native/bin");
    const dir = testTempDir("strata-pg13-");
    chmodSync(dir, 0o755);
    const pgdata = path.join(dir, "pgdata");
    mkdirSync(pgdata, { mode: 0o700 });
    if (asRoot) {
      const { uid, gid } = postgresIds();
      chownSync(pgdata, uid, gid);
    }
    asPostgres(path.join(bin, "initdb"), ["-D", pgdata, "-U", "postgres", "--auth=trust", "--no-sync"]);
    return { dir, pgdata, bin };
  }

  function postgresIds(): { uid: number; gid: number } {
    const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
    return { uid: id("-u"), gid: id("-g") };
  }

  it("names a PostgreSQL older than supported, and a data directory made by another major version", async () => {
    const { dir, pgdata, bin } = oldCluster();
    const port = await freePort();
    const pgctl = path.join(bin, "pg_ctl");
    asPostgres(pgctl, [
      "-D",
      pgdata,
      "-w",
      "-o",
      `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`,
      "-l",
      path.join(pgdata, "log"),
      "start",
    ]);
    try {
      const old = await start({ DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres` });
      expect(old).toEqual({
        code: 1,
        lastLine: expect.stringMatching(
          /^PostgreSQL 13\.\d+ is too old: Strata needs PostgreSQL 14 or newer/,
        ),
      });
    } finally {
      asPostgres(pgctl, ["-D", pgdata, "-w", "-m", "fast", "stop"]);
    }
    // The same cluster's files as the embedded cluster's data directory.
    const made = await start({ STRATA_DATA_DIR: dir, STRATA_PG_PORT: String(await freePort()) });
    expect(made.code).toBe(1);
    expect(made.lastLine).toMatch(/was made by PostgreSQL 13, and this Strata runs PostgreSQL 17/);
  }, 150_000); // an initdb, a cluster's start and stop, and two starts of Strata

  (asRoot ? it : it.skip)(
    "names a data directory that the postgres OS user cannot reach when run as root",
    async () => {
      const hidden = testTempDir("strata-rootonly-");
      chmodSync(hidden, 0o700);
      const { code, lastLine } = await start({ STRATA_DATA_DIR: path.join(hidden, "data") });
      expect(code).toBe(1);
      expect(lastLine).toMatch(
        new RegExp(
          `runs as the OS user "postgres" when Strata runs as root, and that user cannot enter ${hidden}`,
        ),
      );
    },
  );
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}
