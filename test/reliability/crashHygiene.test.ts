import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import http from "node:http";
import { createServer } from "node:net";
import path from "node:path";
import { denoBinary } from "../../src/functions/deno";
import { adminQuery, createTestDatabase, dropTestDatabase } from "../helpers/db";
import {
  TEST_AUTHENTICATOR_PASSWORD,
  TEST_JWT_SECRET,
  TEST_KEK,
  TEST_MANAGEMENT_TOKEN,
} from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

/**
 * A Strata killed with SIGKILL in the middle of an upload, with a function worker running, leaves nothing
 * behind: the worker ends with it, and the next start removes the upload's bytes and the scratch
 * directories (and stops any worker a previous run left that did not end by itself).
 */

const ROOT = path.resolve(__dirname, "../..");

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

interface Cli {
  child: ChildProcess;
  url: string;
  ref: string;
  serviceKey: string;
}

/** `npm start` as a user runs it, with its own temporary directory, reading the keys from its banner. */
async function startCli(databaseUrl: string, dataDir: string, tmpDir: string): Promise<Cli> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "start"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      STRATA_DATA_DIR: dataDir,
      STRATA_KEK: TEST_KEK,
      JWT_SECRET: TEST_JWT_SECRET,
      MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
      AUTHENTICATOR_PASSWORD: TEST_AUTHENTICATOR_PASSWORD,
      LOG_LEVEL: "silent",
      GRAPHILE_ENV: "production",
      TMPDIR: tmpDir,
    },
    stdio: ["ignore", "pipe", "ignore"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  for (let i = 0; i < 240 && !/service_role key: \S+/.test(out); i++)
    await new Promise((r) => setTimeout(r, 250));
  const ref = /Project ref: (\S+)/.exec(out)?.[1];
  const serviceKey = /service_role key: (\S+)/.exec(out)?.[1];
  if (!ref || !serviceKey) {
    child.kill("SIGKILL");
    throw new Error("the server did not print its banner");
  }
  return { child, url: `http://127.0.0.1:${port}`, ref, serviceKey };
}

async function kill(child: ChildProcess, signal: NodeJS.Signals) {
  const exited = new Promise((r) => child.once("exit", r));
  child.kill(signal);
  await exited;
}

/** The pids of the running processes whose command line names `text`. */
function processesNaming(text: string): number[] {
  const found = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(text)) found.push(Number(pid));
    } catch {
      // ended meanwhile
    }
  }
  return found;
}

/** Polls `check` until it holds (at most about 20 s). */
async function eventually(check: () => boolean | Promise<boolean>, what: string) {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`never happened: ${what}`);
}

const scratchDirs = (tmp: string) => readdirSync(tmp).filter((n) => n.startsWith("strata-fn-"));

describe("SIGKILL of Strata in the middle of an upload, with a function worker running", () => {
  let databaseUrl: string;
  const dataDir = testTempDir("strata-crash-hygiene-");
  const tmp = testTempDir("strata-crash-tmp-");
  let cli: Cli | undefined;
  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
  });
  afterAll(async () => {
    if (cli && cli.child.exitCode === null) await kill(cli.child, "SIGTERM");
    await dropTestDatabase(databaseUrl);
  });

  it("leaves no worker, no upload bytes, no row and no scratch directory after the next start", async () => {
    cli = await startCli(databaseUrl, dataDir, tmp);
    const { url, ref } = cli;
    const service = { apikey: cli.serviceKey, authorization: `Bearer ${cli.serviceKey}` };

    // A function, invoked so that its worker runs.
    const form = new FormData();
    form.append("metadata", JSON.stringify({ entrypoint_path: "index.ts", name: "hello" }));
    form.append("file", new Blob(['Deno.serve(() => new Response("hello"))']), "index.ts");
    const deployed = await fetch(`${url}/v1/projects/${ref}/functions/deploy?slug=hello`, {
      method: "POST",
      headers: { authorization: `Bearer ${TEST_MANAGEMENT_TOKEN}` },
      body: form,
    });
    expect(deployed.status).toBe(201);
    const invoke = () => fetch(`${url}/functions/v1/hello`, { headers: service });
    const first = await invoke();
    expect(await first.text()).toBe("hello");
    const [scratch] = scratchDirs(tmp);
    expect(scratch).toBeDefined();
    const worker = path.join(tmp, scratch);
    expect(processesNaming(worker).length).toBeGreaterThan(0);

    // A worker a previous run left behind that did not end (stuck in a loop, or started without a way to
    // learn of its parent's end), in a scratch directory of a Strata process that is gone.
    const stuckDir = path.join(tmp, "strata-fn-999999-0badc0de-AbCdEf");
    mkdirSync(stuckDir);
    const stuckScript = path.join(dataDir, "stuck.js");
    writeFileSync(stuckScript, "setInterval(() => {}, 1000)");
    const stuck = spawn(
      denoBinary(),
      ["run", "--no-prompt", stuckScript, path.join(stuckDir, "worker.sock")],
      { stdio: "ignore" },
    );
    const stuckEnded = new Promise<NodeJS.Signals | null>((r) => stuck.once("exit", (_c, s) => r(s)));

    // An upload of 40 MB of which 8 MB are sent: its bytes are on their way to disk when the server dies.
    const bucket = await fetch(`${url}/storage/v1/bucket`, {
      method: "POST",
      headers: { ...service, "content-type": "application/json" },
      body: JSON.stringify({ id: "uploads" }),
    });
    expect(bucket.status).toBe(200);
    const upload = http.request(`${url}/storage/v1/object/uploads/big.bin`, {
      method: "POST",
      headers: { ...service, "content-type": "application/octet-stream", "content-length": 40 * 1024 * 1024 },
    });
    upload.on("error", () => {});
    for (let i = 0; i < 8; i++) upload.write(Buffer.alloc(1024 * 1024, i));
    const projectDir = path.join(dataDir, "storage", ref);
    const partials = () => {
      try {
        return readdirSync(projectDir).filter((n) => n.endsWith(".part"));
      } catch {
        return [];
      }
    };
    await eventually(
      () => partials().some((n) => statSync(path.join(projectDir, n)).size > 0),
      "the upload's first bytes on disk",
    );

    await kill(cli.child, "SIGKILL");
    upload.destroy();

    // The worker ends by itself with its parent.
    await eventually(() => processesNaming(worker).length === 0, "the worker's end");
    // What the next start has to clean: the partial file, the dead run's scratch directory, the stuck worker.
    expect(partials().length).toBe(1);
    expect(scratchDirs(tmp).sort()).toEqual([scratch, path.basename(stuckDir)].sort());

    cli = await startCli(databaseUrl, dataDir, tmp);
    expect(await stuckEnded).toBe("SIGKILL");
    expect(scratchDirs(tmp)).toEqual([]);
    await eventually(() => partials().length === 0, "the partial file's removal");
    expect(readdirSync(projectDir)).toEqual([]);
    const { rows } = await adminQuery(
      "select count(*)::int as n from storage.objects where name = 'big.bin'",
      [],
      databaseUrl,
    );
    expect(rows[0].n).toBe(0);

    // The restarted server serves the function and takes uploads.
    const again = await fetch(`${cli.url}/functions/v1/hello`, {
      headers: { apikey: cli.serviceKey, authorization: `Bearer ${cli.serviceKey}` },
    });
    expect(await again.text()).toBe("hello");
    const small = await fetch(`${cli.url}/storage/v1/object/uploads/small.bin`, {
      method: "POST",
      headers: {
        apikey: cli.serviceKey,
        authorization: `Bearer ${cli.serviceKey}`,
        "content-type": "application/octet-stream",
      },
      body: Buffer.from("small"),
    });
    expect(small.status).toBe(200);
    expect(readdirSync(projectDir)).toHaveLength(1);

    // A graceful stop ends its workers too.
    const [current] = scratchDirs(tmp);
    await kill(cli.child, "SIGTERM");
    await eventually(() => processesNaming(path.join(tmp, current)).length === 0, "the worker's end");
  }, 180_000);
});
