import { spawn, type ChildProcess } from "node:child_process";

import path from "node:path";
import {
  startTestServer,
  TEST_JWT_SECRET,
  TEST_MANAGEMENT_TOKEN,
  type TestServer,
  TEST_KEK,
} from "../helpers/server";
import { mgmt } from "./client";
import { testTempDir } from "../helpers/tempDir";

const LIMIT = 5;

/** Starts a second Strata process (`npm start`'s entry point) on the first server's database. */
async function startSecondProcess(server: TestServer): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    path.resolve("node_modules/.bin/node"),
    ["--import", "tsx", "src/cli/main.ts", "start"],
    {
      env: {
        ...process.env,
        DATABASE_URL: server.dbUrl,
        PORT: "0",
        JWT_SECRET: TEST_JWT_SECRET,
        MANAGEMENT_TOKEN: TEST_MANAGEMENT_TOKEN,
        AUTHENTICATOR_PASSWORD: "strata-test-authenticator",
        STRATA_KEK: TEST_KEK,
        STRATA_DATA_DIR: testTempDir("strata-second-"),
        MANAGEMENT_RATE_LIMIT: String(LIMIT),
        LOG_LEVEL: "silent",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      const port = /API URL: http:\/\/localhost:(\d+)/.exec(out)?.[1];
      if (port) resolve(`http://127.0.0.1:${port}`);
    });
    child.once("exit", (code) => reject(new Error(`second process exited with ${code}`)));
  });
  return { url, child };
}

describe("rate limits shared by Strata processes", () => {
  let first: TestServer;
  let second: { url: string; child: ChildProcess };
  beforeAll(async () => {
    first = await startTestServer({ MANAGEMENT_RATE_LIMIT: String(LIMIT) });
    second = await startSecondProcess(first);
  }, 60_000);
  afterAll(async () => {
    const exited = new Promise((resolve) => second.child.once("exit", resolve));
    second.child.kill("SIGTERM");
    await exited;
    await first.stop();
  });

  it("refuses the request past the limit whichever process receives it", async () => {
    const servers = [first, { ...first, url: second.url }];
    const path = `/v1/projects/${first.ref}`;
    for (let i = 0; i < LIMIT; i++) {
      const res = await mgmt(servers[i % 2], "GET", path);
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit")).toBe(String(LIMIT));
      expect(res.headers.get("x-ratelimit-remaining")).toBe(String(LIMIT - 1 - i));
    }
    for (const server of servers) {
      const refused = await mgmt(server, "GET", path);
      expect(refused.status).toBe(429);
      expect(refused.body.message).toMatch(/rate limit/i);
      expect(refused.headers.get("x-ratelimit-remaining")).toBe("0");
      expect(Number(refused.headers.get("x-ratelimit-reset"))).toBeGreaterThan(0);
    }
    // Another scope (here the caller's own profile) is counted apart.
    expect((await mgmt(servers[1], "GET", "/v1/profile")).status).toBe(200);
  });

  it("counts unauthenticated callers by address and still answers 401 with the headers", async () => {
    const res = await mgmt(first, "GET", "/v1/organizations", { token: null });
    expect(res.status).toBe(401);
    expect(res.headers.get("x-ratelimit-limit")).toBe(String(LIMIT));
    expect(res.headers.get("x-ratelimit-remaining")).toBe(String(LIMIT - 1));
  });
});

describe("limits a route declares", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.stop());

  it("counts database/context against its own limits (1 a second, 10 a minute), apart from the others", async () => {
    const context = `/v1/projects/${server.ref}/database/context`;
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      const res = await mgmt(server, "GET", context);
      if (i === 0) expect(res.headers.get("x-ratelimit-limit")).toBe("1");
      statuses.push(res.status);
    }
    expect(statuses[0]).toBe(200);
    expect(statuses).toContain(429);
    const other = await mgmt(server, "GET", `/v1/projects/${server.ref}`);
    expect(other.status).toBe(200);
  });
});
