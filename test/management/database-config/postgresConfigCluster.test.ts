import { readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import { startStrata, type RunningStrata } from "../../../src/app";
import { loadConfig } from "../../../src/config";
import { createLogger } from "../../../src/log";
import { testTempDir } from "../../helpers/tempDir";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

// Cluster-wide settings (ALTER SYSTEM, restarts): this file runs Strata with an embedded cluster of its own.
describe("Management API: cluster-wide PostgreSQL config on the embedded cluster", () => {
  let dir: string;
  let strata: RunningStrata;
  let call: (method: string, body?: unknown) => Promise<{ status: number; body: any }>;

  beforeAll(async () => {
    dir = testTempDir("strata-pgconfig-");
    strata = await startStrata(
      loadConfig({
        PORT: "0",
        STRATA_PG_PORT: String(await freePort()),
        STRATA_DATA_DIR: dir,
        MANAGEMENT_TOKEN: "sbp_" + "0123456789abcdef".repeat(2) + "01234567",
      }),
      createLogger("silent"),
    );
    call = async (method, body) => {
      const res = await fetch(
        `http://127.0.0.1:${strata.port}/v1/projects/${strata.info.ref}/config/database/postgres`,
        {
          method,
          headers: {
            Authorization: `Bearer ${strata.info.management_token}`,
            "content-type": "application/json",
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        },
      );
      return { status: res.status, body: await res.json() };
    };
  }, 120_000);
  afterAll(async () => {
    await strata?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function show(name: string): Promise<string> {
    const client = new pg.Client({ connectionString: strata.ctx.adminUrl });
    await client.connect();
    try {
      return (await client.query("select current_setting($1) as v", [name])).rows[0].v;
    } finally {
      await client.end();
    }
  }

  it("applies a reload-time setting with ALTER SYSTEM and a reload", async () => {
    const before = await show("log_checkpoints");
    const wanted = before === "on" ? false : true;
    const put = await call("PUT", { log_checkpoints: wanted, checkpoint_timeout: "7min" });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ log_checkpoints: wanted, checkpoint_timeout: "7min" });
    expect(await show("log_checkpoints")).toBe(wanted ? "on" : "off");
    expect(await show("checkpoint_timeout")).toBe("7min");
    const auto = readFileSync(path.join(dir, "pgdata", "postgresql.auto.conf"), "utf8");
    expect(auto).toMatch(/checkpoint_timeout = '7min'/);
    // Left out of the administrator's PUT (the CLI's `postgres-config delete`), the cluster's override goes.
    const { checkpoint_timeout: _deleted, ...rest } = (await call("GET")).body;
    expect((await call("PUT", rest)).status).toBe(200);
    expect(await show("checkpoint_timeout")).toBe("5min");
    expect(await show("log_checkpoints")).toBe(wanted ? "on" : "off");
    expect(readFileSync(path.join(dir, "pgdata", "postgresql.auto.conf"), "utf8")).not.toMatch(
      /checkpoint_timeout/,
    );
  });

  it("restarts the cluster for a start-time setting only when restart_database says so", async () => {
    const refused = await call("PUT", { max_locks_per_transaction: 128 });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/restart_database: true/);
    expect(await show("max_locks_per_transaction")).toBe("64");

    const applied = await call("PUT", { max_locks_per_transaction: 128, restart_database: true });
    expect(applied.status).toBe(200);
    expect(applied.body.max_locks_per_transaction).toBe(128);
    expect(await show("max_locks_per_transaction")).toBe("128");
    // The server keeps serving after the restart.
    expect((await call("GET")).body.max_locks_per_transaction).toBe(128);
  });

  it("refuses what Strata sets on the command line and values out of range", async () => {
    const senders = await call("PUT", { max_wal_senders: 5, restart_database: true });
    expect(senders.status).toBe(400);
    expect(senders.body.message).toMatch(/command line/);
    const range = await call("PUT", { checkpoint_timeout: "2d" });
    expect(range.status).toBe(400);
    expect(range.body.message).toMatch(/checkpoint_timeout must be between 30 and 86400 \(unit s\)/);
  });
});
