import { spawnSync } from "node:child_process";
import path from "node:path";
import { ConfigError, loadConfig } from "../../src/config";

describe("configuration", () => {
  it("takes defaults and lets the environment override them", () => {
    expect(loadConfig({})).toMatchObject({
      port: 54321,
      domain: "localhost",
      logLevel: "info",
      databaseUrl: undefined,
    });
    expect(loadConfig({ PORT: "8080", STRATA_DOMAIN: "example.test" }, { PORT: 9000 })).toMatchObject({
      port: 8080,
      domain: "example.test",
    });
    expect(loadConfig({}, { PORT: 9000 }).port).toBe(9000);
  });

  it.each([
    [{ PORT: "eighty" }, /PORT must be a port number/],
    [{ PORT: "70000" }, /PORT must be a port number/],
    [{ DATABASE_URL: "mysql://x" }, /DATABASE_URL must be a postgres:\/\/ connection URL/],
    [{ JWT_SECRET: "short" }, /JWT_SECRET must be at least 32 characters/],
    [{ LOG_LEVEL: "loud" }, /LOG_LEVEL must be one of/],
    [{ STRATA_OUTBOUND_LOOPBACK: "yes" }, /STRATA_OUTBOUND_LOOPBACK must be deny or allow/],
    // A file where the data directory (or a folder above it) should be: named, with the fix.
    [
      { STRATA_DATA_DIR: __filename },
      /STRATA_DATA_DIR must name a directory .* is a file: point it at a directory/,
    ],
    [{ STRATA_DATA_DIR: path.join(__filename, "data") }, /STRATA_DATA_DIR must name a directory/],
  ])("rejects %j with a clear message", (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it("stops start-up with one line and a non-zero exit", () => {
    const root = path.resolve(__dirname, "../..");
    const run = spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
      cwd: root,
      env: { ...process.env, PORT: "not-a-port" },
      encoding: "utf8",
    });
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^Invalid configuration: PORT must be/),
    ]);
  });

  it("stops with one line when DATABASE_URL is unreachable", () => {
    const root = path.resolve(__dirname, "../..");
    const run = spawnSync(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" },
      encoding: "utf8",
    });
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^Cannot connect to the database/)]);
  });
});
