/**
 * Strata as a process of its own for the benchmarks and the soak: `strata start` on an embedded PostgreSQL
 * in a temporary directory (loopback only), its default project's ref and keys read from the banner.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import net from "node:net";
import path from "node:path";

export interface ServerProcess {
  child: ChildProcess;
  /** The port it listens on. */
  port: number;
  ref: string;
  anonKey: string;
  serviceKey: string;
  /** The embedded cluster's superuser URL of the default project's database. */
  superuserUrl: string;
  /** The server's data directory (a temporary one, removed by stopServerProcess). */
  dataDir: string;
}

export interface ServerOptions {
  /** Prefix of the temporary data directory's name. */
  name: string;
  /** 0: a free port (and a free one for the embedded PostgreSQL, whatever `pgPort` says). */
  port: number;
  pgPort: number;
  jwtSecret: string;
  managementToken: string;
  logLevel?: string;
  /** Run the compiled server (`dist/`, what `npm start` runs) rather than the TypeScript sources through tsx. */
  compiled?: boolean;
  /** Copy the server's output to stderr. */
  echo?: boolean;
  /** Further settings of the server (e.g. STORAGE_S3_*). */
  env?: Record<string, string>;
}

/** A command-line option's value (`--name value`), or the fallback. */
export function argument(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 || process.argv[i + 1] === undefined ? fallback : process.argv[i + 1];
}

/** The Node.js 22 `npm install` brought (what `npm start` runs), whatever Node runs the bench. */
export function serverNode(): string {
  return existsSync("node_modules/.bin/node") ? path.resolve("node_modules/.bin/node") : process.execPath;
}

/** Starts the server and waits for its banner (the embedded cluster's first start included). */
export async function startServerProcess(given: ServerOptions): Promise<ServerProcess> {
  const options = given.port ? given : { ...given, port: await freePort(), pgPort: await freePort() };
  const entry = options.compiled ? ["dist/src/cli/main.js"] : ["--import", "tsx", "src/cli/main.ts"];
  if (options.compiled && !existsSync(entry[0]))
    throw new Error("dist/ is missing: run `npm run build` first");
  // BENCH_SERVER_NODE_FLAGS: flags for the server's Node only (e.g. --cpu-prof), not for the bench's.
  const flags = (process.env.BENCH_SERVER_NODE_FLAGS ?? "").split(" ").filter(Boolean);
  const node = serverNode();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `${options.name}-`));
  const child = spawn(node, [...flags, ...entry, "start"], {
    env: {
      ...process.env,
      DATABASE_URL: "",
      PORT: String(options.port),
      STRATA_PG_PORT: String(options.pgPort),
      STRATA_DATA_DIR: dataDir,
      JWT_SECRET: options.jwtSecret,
      MANAGEMENT_TOKEN: options.managementToken,
      MANAGEMENT_RATE_LIMIT: "1000000",
      LOG_LEVEL: options.logLevel ?? "error",
      GRAPHILE_ENV: process.env.GRAPHILE_ENV ?? "production",
      ...options.env,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout!.on("data", (d) => {
    out += d;
    if (options.echo) process.stderr.write(d);
  });
  for (let i = 0; i < 600 && !/service_role key:/.test(out); i++) {
    if (child.exitCode !== null) {
      rmSync(dataDir, { recursive: true, force: true });
      throw new Error(`the server exited (${child.exitCode}):\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const field = (label: string) => new RegExp(`${label}: (\\S+)`).exec(out)?.[1] ?? "";
  const password = readFileSync(path.join(dataDir, "pg-superuser-password"), "utf8").trim();
  return {
    child,
    port: options.port,
    ref: field("Project ref"),
    anonKey: field("anon key"),
    serviceKey: field("service_role key"),
    superuserUrl: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${options.pgPort}/postgres`,
    dataDir,
  };
}

/**
 * Stops the server (SIGTERM: it closes its pools and its embedded cluster), waits for it to exit and removes
 * its data directory.
 */
export async function stopServerProcess(server: ServerProcess): Promise<void> {
  if (server.child.exitCode === null) {
    const exited = new Promise((r) => server.child.once("exit", r));
    server.child.kill("SIGTERM");
    await exited;
  }
  rmSync(server.dataDir, { recursive: true, force: true });
}

/** A process's resident memory in MB, from /proc. */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** A port nobody listens on now (the machine is shared: fixed ports may be taken). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
