import { execFile, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import type { TestServer } from "../helpers/server";
import { testTempDir } from "../helpers/tempDir";

/**
 * The platform's own clients, unchanged (devDependencies pinned in package.json): its CLI driven through a
 * profile file, its MCP server over stdio. Both reach the test server through its Management API only.
 */

const BIN = path.resolve(__dirname, "../../node_modules/.bin");

/** The MCP server's tool groups that need no internet (`docs` fetches the platform's documentation). */
const OFFLINE_FEATURES = "account,database,debugging,development,functions,storage,branching";

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface Cli {
  /** A project directory (`supabase init` run in it) the commands run in. */
  dir: string;
  run(args: string[], opts?: RunOptions): Promise<CliResult>;
  /** Runs a command that must succeed; its stdout. */
  ok(args: string[], opts?: RunOptions): Promise<string>;
}

export interface RunOptions {
  cwd?: string;
  /** What the command reads on stdin (`encryption update-root-key`'s key); else stdin stays open, unread. */
  input?: string;
}

export interface CliOptions {
  /** The profile's `project_host` (the server's STRATA_DOMAIN); default localhost. */
  projectHost?: string;
  /**
   * A hosts file the CLI resolves names with: each command then runs in a mount namespace of its own where it
   * is /etc/hosts (root only), as an operator's DNS would answer.
   */
  hostsFile?: string;
  env?: Record<string, string>;
}

/**
 * The CLI with a profile naming the test server as the platform (`--profile <file>`), the management token
 * as SUPABASE_ACCESS_TOKEN and a home directory of its own.
 */
export async function platformCli(server: TestServer, options: CliOptions = {}): Promise<Cli> {
  const home = testTempDir("strata-cli-home-");
  const profile = path.join(home, "strata-profile.json");
  writeFileSync(
    profile,
    JSON.stringify({
      name: "strata",
      api_url: server.url,
      dashboard_url: server.url,
      project_host: options.projectHost ?? "localhost",
    }),
  );
  const env = {
    PATH: process.env.PATH ?? "",
    HOME: home,
    SUPABASE_ACCESS_TOKEN: server.managementToken,
    DO_NOT_TRACK: "1",
    ...options.env,
  };
  const command = [path.join(BIN, "supabase"), "--profile", profile];
  if (options.hostsFile) {
    command.unshift(
      "unshare",
      "-m",
      "sh",
      "-c",
      'mount --bind "$0" /etc/hosts && exec "$@"',
      options.hostsFile,
    );
  }
  const run = (args: string[], opts: RunOptions = {}) =>
    new Promise<CliResult>((resolve) => {
      const child = execFile(
        command[0],
        [...command.slice(1), ...args],
        { env, cwd: opts.cwd ?? dir, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) =>
          resolve({
            code: error ? Number(error.code ?? 1) : 0,
            stdout: String(stdout),
            stderr: String(stderr),
          }),
      );
      if (opts.input !== undefined) child.stdin?.end(opts.input);
    });
  const dir = testTempDir("strata-cli-project-");
  const cli: Cli = {
    dir,
    run,
    async ok(args, opts) {
      const r = await run(args, opts);
      if (r.code !== 0)
        throw new Error(`supabase ${args.join(" ")} failed (${r.code}):\n${r.stderr}\n${r.stdout}`);
      return r.stdout;
    },
  };
  await cli.ok(["init", "--yes"]);
  return cli;
}

export interface Mcp {
  /** Calls a tool; its text answer parsed as JSON (the MCP server answers JSON text). */
  call(name: string, args: Record<string, unknown>): Promise<any>;
  /** Calls a tool that must fail; the error text. */
  fails(name: string, args: Record<string, unknown>): Promise<string>;
  tools(): Promise<string[]>;
  close(): void;
}

/** The SQL result a tool wraps in its untrusted-data boundary, parsed. */
export function untrusted(text: string): any {
  const m = /<untrusted-data-[0-9a-f-]+>\n([\s\S]*)\n<\/untrusted-data-[0-9a-f-]+>/.exec(text);
  if (!m) throw new Error(`no untrusted-data block in ${text}`);
  return JSON.parse(m[1]);
}

/**
 * The MCP server as an agent's host starts it (`--api-url`, `--access-token`), spoken to over stdio with
 * newline-delimited JSON-RPC: the protocol's initialize handshake, then `tools/list` and `tools/call`.
 */
export async function platformMcp(server: TestServer, extra: string[] = []): Promise<Mcp> {
  const child: ChildProcessWithoutNullStreams = spawn(
    path.join(BIN, "mcp-server-supabase"),
    [
      "--api-url",
      server.url,
      "--access-token",
      server.managementToken,
      "--features",
      OFFLINE_FEATURES,
      ...extra,
    ],
    { env: { PATH: process.env.PATH ?? "", HOME: testTempDir("strata-mcp-home-") } },
  );
  const waiting = new Map<number, (message: any) => void>();
  let buffer = "";
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  child.stdout.on("data", (d) => {
    buffer += d;
    for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
      const line = buffer.slice(0, i);
      buffer = buffer.slice(i + 1);
      if (!line.trim()) continue;
      const message = JSON.parse(line);
      waiting.get(message.id)?.(message);
      waiting.delete(message.id);
    }
  });
  let next = 0;
  const request = (method: string, params: unknown) =>
    new Promise<any>((resolve, reject) => {
      const id = ++next;
      waiting.set(id, (m) =>
        m.error ? reject(new Error(`${method}: ${m.error.message}\n${stderr}`)) : resolve(m.result),
      );
      child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  await request("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "strata-test", version: "1" },
  });
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  const callTool = async (name: string, args: Record<string, unknown>) => {
    const result = await request("tools/call", { name, arguments: args });
    return { isError: result.isError === true, text: String(result.content?.[0]?.text ?? "") };
  };
  return {
    async call(name, args) {
      const r = await callTool(name, args);
      if (r.isError) throw new Error(`${name} failed: ${r.text}`);
      return JSON.parse(r.text);
    },
    async fails(name, args) {
      const r = await callTool(name, args);
      if (!r.isError) throw new Error(`${name} succeeded: ${r.text}`);
      return r.text;
    },
    async tools() {
      return (await request("tools/list", {})).tools.map((t: { name: string }) => t.name);
    },
    close: () => child.kill(),
  };
}
