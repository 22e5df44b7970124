import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import pg from "pg";
import { testTempDir } from "../helpers/tempDir";

const ROOT = path.resolve(__dirname, "../..");

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function postmasterAlive(dataDir: string): boolean {
  try {
    const pid = Number(readFileSync(path.join(dataDir, "pgdata", "postmaster.pid"), "utf8").split("\n")[0]);
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** `npm start` as a user runs it: the CLI with an embedded PostgreSQL in its own data directory. */
async function startCli(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: "warn", ...env },
    stdio: "ignore",
  });
  // A first start (initdb, bootstrap of the control plane and the default project) takes long on a loaded machine.
  for (let i = 0; i < 600; i++) {
    const ok = await fetch(`http://127.0.0.1:${env.PORT}/health`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return child;
    await new Promise((r) => setTimeout(r, 250));
  }
  child.kill("SIGKILL");
  throw new Error("server did not become healthy");
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

describe("the server's lifecycle on the embedded PostgreSQL", () => {
  it("keeps data across restarts, stops PostgreSQL on SIGINT and recovers from SIGKILL", async () => {
    const dataDir = testTempDir("strata-lifecycle-");
    const env = {
      STRATA_DATA_DIR: dataDir,
      PORT: String(await freePort()),
      STRATA_PG_PORT: String(await freePort()),
    };
    // The embedded cluster's superuser password is generated and kept in the data directory.
    const dbUrl = () => {
      const password = readFileSync(path.join(dataDir, "pg-superuser-password"), "utf8").trim();
      return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${env.STRATA_PG_PORT}/postgres`;
    };
    const sql = async (text: string) => {
      const client = new pg.Client({ connectionString: dbUrl() });
      await client.connect();
      try {
        return (await client.query(text)).rows;
      } finally {
        await client.end();
      }
    };

    let child = await startCli(env);
    await sql("create table memo (body text); insert into memo values ('written before the restart')");
    let exit = exited(child);
    child.kill("SIGINT");
    expect(await exit).toBe(0);
    expect(postmasterAlive(dataDir)).toBe(false);

    child = await startCli(env);
    expect(await sql("select body from memo")).toEqual([{ body: "written before the restart" }]);
    exit = exited(child);
    child.kill("SIGKILL");
    await exit;

    // The orphaned PostgreSQL is taken over by the next start; the data survives.
    child = await startCli(env);
    expect(await sql("select body from memo")).toEqual([{ body: "written before the restart" }]);
    exit = exited(child);
    child.kill("SIGTERM");
    expect(await exit).toBe(0);
    expect(postmasterAlive(dataDir)).toBe(false);
  }, 420_000);
});
