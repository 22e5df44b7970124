import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { startStrata, type RunningStrata } from "../../src/app";
import { loadConfig } from "../../src/config";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "../../src/db/embedded";
import { createLogger } from "../../src/log";

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

// This file runs its own PostgreSQL so it can stop it under a running server.
describe("/health while the database goes away and comes back", () => {
  let dir: string;
  let pgPort: number;
  let db: EmbeddedDatabase;
  let strata: RunningStrata;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "strata-health-"));
    pgPort = await freePort();
    db = await startEmbeddedPostgres(dir, pgPort);
    strata = await startStrata(
      loadConfig({
        DATABASE_URL: db.url,
        PORT: "0",
        STRATA_DATA_DIR: dir,
        AUTHENTICATOR_PASSWORD: "health-test-password",
      }),
      createLogger("silent"),
    );
  });
  afterAll(async () => {
    await strata?.stop();
    await db?.stop();
  });

  it("answers 503 while the database is down and 200 again once it is back, without a restart", async () => {
    const health = () => fetch(`http://127.0.0.1:${strata.port}/health`).then((r) => r.status);
    expect(await health()).toBe(200);
    await db.stop();
    expect(await health()).toBe(503);
    db = await startEmbeddedPostgres(dir, pgPort);
    let status = 0;
    for (let i = 0; i < 20 && status !== 200; i++) {
      status = await health();
      if (status !== 200) await new Promise((r) => setTimeout(r, 250));
    }
    expect(status).toBe(200);
  });
});
