import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import type { IncomingHttpHeaders } from "node:http";
import net from "node:net";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { Pool, type Dispatcher } from "undici";
import type { ApiChannel } from "./channel";
import { deniedHosts, IGNORED_ENV } from "./network";
import { NEUTRAL_ROOT, pathNeutraliser } from "./neutralPaths";
import { makeScratchDir } from "./scratch";

/** What a worker runs: one version of one function, with its environment. */
export interface WorkerSpec {
  /** Directory holding the version's deployed files (read-only for the function). */
  dir: string;
  entrypoint: string;
  importMap: string | undefined;
  env: Record<string, string>;
  /** Serves the project's own API on a unix socket at the given path (SUPABASE_URL's way in). */
  api?: (socketPath: string) => ApiChannel;
}

export interface WorkerLimits {
  /** Continuous CPU time a worker may spend without answering before it is stopped. */
  cpuMs: number;
  /** V8 heap limit of a worker. */
  memoryMb: number;
  bootMs: number;
}

/** Where the runtime keeps its own files: the bootstrap module and Deno's module cache, under the data dir. */
export interface RuntimeFiles {
  deno: string;
  bootstrap: string;
  denoDir: string;
  dataDir: string;
}

/** Why a worker stopped serving, as the platform names it. */
export type WorkerEnd = "boot_error" | "limit" | "exited";

const CPU_SAMPLE_MS = 100;
/** How long a kept-alive connection to a worker stays open unused. */
const IDLE_SOCKET_MS = 2000;
const OUT_OF_MEMORY = /out of memory|heap limit/i;
const CLOCK_TICKS_PER_SECOND = 100;

/** CPU time (ms) a process has used, from /proc; undefined where /proc is not available. */
function cpuTimeMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the line (11 and 12 after the command name).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/**
 * `setpriv --pdeathsig KILL --` (util-linux) where the host has one that knows the option: the kernel then
 * kills a worker as soon as the Strata process that started it dies, even a worker stuck in a loop that would
 * never read the end of its supervisor pipe. Looked for once.
 */
let parentDeathPrefix: string[] | undefined;
function parentDeathSignal(): string[] {
  if (parentDeathPrefix) return parentDeathPrefix;
  parentDeathPrefix = [];
  if (process.platform !== "linux") return parentDeathPrefix;
  for (const setpriv of ["/usr/bin/setpriv", "/bin/setpriv"]) {
    const help = spawnSync(setpriv, ["--help"], { encoding: "utf8" });
    if (help.stdout?.includes("--pdeathsig")) {
      parentDeathPrefix = [setpriv, "--pdeathsig", "KILL", "--"];
      break;
    }
  }
  return parentDeathPrefix;
}

/**
 * The deployment's import map when it names one, else the `deno.json` next to its entrypoint (imports,
 * compiler options), as `supabase functions deploy` uses them; never a configuration outside its files.
 */
function configFlags(spec: WorkerSpec): string[] {
  if (spec.importMap) return ["--no-config", `--import-map=${path.join(spec.dir, spec.importMap)}`];
  const entryDir = path.dirname(path.join(spec.dir, spec.entrypoint));
  const config = ["deno.json", "deno.jsonc"].map((f) => path.join(entryDir, f)).find((f) => existsSync(f));
  return config ? [`--config=${config}`] : ["--no-config"];
}

/** What the function's lines show instead of this machine's paths (see neutralPaths.ts). */
function neutraliserFor(spec: WorkerSpec, runtime: RuntimeFiles, scratch: string) {
  return pathNeutraliser([
    [spec.dir, `${NEUTRAL_ROOT}/source`],
    [runtime.denoDir, `${NEUTRAL_ROOT}/cache`],
    [path.dirname(runtime.bootstrap), NEUTRAL_ROOT],
    [runtime.dataDir, NEUTRAL_ROOT],
    [scratch, "/tmp"],
    [runtime.deno, "/usr/local/bin/deno"],
  ]);
}

/**
 * Kept-alive connections to a worker's socket (undici: an answer goes to the caller's handler as it is read,
 * with no stream or header object made per answer). Idle ones close after IDLE_SOCKET_MS, before the worker
 * would; no time limit of undici's own: the invocation's wall-clock limit applies (router.ts).
 */
function connectionsTo(socketPath: string): Pool {
  return new Pool("http://localhost", {
    socketPath,
    connections: 256,
    keepAliveTimeout: IDLE_SOCKET_MS,
    keepAliveMaxTimeout: IDLE_SOCKET_MS,
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}

/** Passes an answer on to the caller's handler, and counts the request done when it ends either way. */
class Counted implements Dispatcher.DispatchHandler {
  constructor(
    private readonly handler: Dispatcher.DispatchHandler,
    private readonly done: () => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown) {
    this.handler.onRequestStart?.(controller, context);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ) {
    this.handler.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer) {
    this.handler.onResponseData?.(controller, chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders) {
    this.done();
    this.handler.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error) {
    this.done();
    this.handler.onResponseError?.(controller, error);
  }
}

/**
 * One Deno process serving one function version on a unix socket in its own scratch directory. It may
 * read only its files, the bootstrap and the scratch directory, write only the scratch directory, see
 * only the environment it is given; it may reach the internet (network.ts), not this machine's network
 * nor listen on a port, nor run processes or load native code. Its own project's API is served to it on
 * a second socket in the scratch directory (channel.ts). What it prints is recorded with neutral paths.
 */
export class Worker {
  readonly scratch: string;
  readonly socketPath: string;
  private readonly apiSocketPath: string;
  private readonly api: ApiChannel | undefined;
  private readonly child: ChildProcess;
  private readonly connections: Pool;
  private readonly ready: Promise<void>;
  private readonly stderrTail: string[] = [];
  private cpuTimer: NodeJS.Timeout | undefined;
  inFlight = 0;
  /** Requests answered so far: a busy worker that still answers is working, not stuck. */
  private completed = 0;
  lastUsed = Date.now();
  ended: WorkerEnd | undefined;
  private readonly endWaiters = new Set<(why: WorkerEnd) => void>();

  constructor(
    spec: WorkerSpec,
    private readonly limits: WorkerLimits,
    runtime: RuntimeFiles,
    onLine: (level: "log" | "error", line: string) => void,
    /** The pool's owner id (claimOwner), in the scratch directory's name. */
    owner: string,
  ) {
    this.scratch = makeScratchDir(owner);
    this.socketPath = path.join(this.scratch, "worker.sock");
    this.apiSocketPath = path.join(this.scratch, "api.sock");
    this.connections = connectionsTo(this.socketPath);
    const denied = deniedHosts().join(",");
    const args = [
      "run",
      "--no-prompt",
      ...configFlags(spec),
      "--no-lock",
      "--quiet",
      "--allow-net",
      `--deny-net=${denied}`,
      "--allow-import",
      `--deny-import=${denied}`,
      "--allow-env",
      `--ignore-env=${IGNORED_ENV.join(",")}`,
      `--allow-read=${[spec.dir, this.scratch, runtime.bootstrap].join(",")}`,
      `--allow-write=${this.scratch}`,
      `--v8-flags=--max-old-space-size=${limits.memoryMb}`,
      runtime.bootstrap,
      this.socketPath,
      pathToFileURL(path.join(spec.dir, spec.entrypoint)).href,
      this.apiSocketPath,
    ];
    // Deno's own environment: its module cache and settings. The function's variables (secrets a tenant
    // names) are not the process's, where Deno and the loader would read them (proxies, registries,
    // LD_PRELOAD): the bootstrap sets them from stdin before the function's code runs.
    // Certificates: the host's trust store besides Deno's own, as other programs on the host use it.
    const env = {
      // Temporary files (Deno.makeTempFile, os.tmpdir()) go to the scratch directory.
      TMPDIR: this.scratch,
      DENO_DIR: runtime.denoDir,
      DENO_TLS_CA_STORE: "mozilla,system",
      DENO_NO_UPDATE_CHECK: "1",
      NO_COLOR: "1",
    };
    this.api = spec.api?.(this.apiSocketPath);
    const [command, ...prefix] = [...parentDeathSignal(), runtime.deno];
    this.child = spawn(command, [...prefix, ...args], {
      cwd: this.scratch,
      env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    // stdin is the supervisor pipe: the function's variables as one JSON line, then held open while this
    // process lives. The bootstrap exits when it ends, so a worker does not outlive a Strata that died.
    this.child.stdin!.on("error", () => {});
    this.child.stdin!.write(`${JSON.stringify(spec.env)}\n`);
    const neutral = neutraliserFor(spec, runtime, this.scratch);
    createInterface({ input: this.child.stdout! }).on("line", (l) => onLine("log", neutral(l)));
    createInterface({ input: this.child.stderr! }).on("line", (l) => {
      const line = neutral(l);
      this.stderrTail.push(line);
      if (this.stderrTail.length > 20) this.stderrTail.shift();
      onLine("error", line);
    });
    // V8 ends a process that reaches its heap limit: that is the memory limit, not a crash. "close"
    // comes after the last line of stderr, which says so.
    this.child.on("close", () =>
      this.end(this.ended ?? (this.stderrTail.some((l) => OUT_OF_MEMORY.test(l)) ? "limit" : "exited")),
    );
    this.child.on("error", () => this.end("boot_error"));
    this.ready = this.waitForSocket();
  }

  /** Resolves once the function listens; rejects with the boot error otherwise. */
  booted(): Promise<void> {
    return this.ready;
  }

  /** Whether the worker accepts connections: its socket file appears at bind, before it listens. */
  private accepting(): Promise<boolean> {
    return new Promise((resolve) => {
      const probe = net.connect(this.socketPath);
      probe.once("connect", () => {
        probe.destroy();
        resolve(true);
      });
      probe.once("error", () => resolve(false));
    });
  }

  private async waitForSocket(): Promise<void> {
    await this.api?.listening.catch((e: Error) => {
      this.stop("boot_error");
      throw e;
    });
    const deadline = Date.now() + this.limits.bootMs;
    while (!this.ended) {
      if (existsSync(this.socketPath) && (await this.accepting())) return;
      if (Date.now() > deadline) {
        this.stop("boot_error");
        break;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(this.stderrTail.join("\n") || "The function did not call Deno.serve");
  }

  /** Resolves with the reason when the worker stops. */
  onEnd(listener: (why: WorkerEnd) => void): () => void {
    if (this.ended) {
      listener(this.ended);
      return () => {};
    }
    this.endWaiters.add(listener);
    return () => this.endWaiters.delete(listener);
  }

  /** Sends one request to the function; `handler` gets its answer as it is read (undici's dispatch). */
  request(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
    this.inFlight++;
    this.lastUsed = Date.now();
    this.watchCpu();
    this.connections.dispatch(options, new Counted(handler, this.requestDone));
  }

  private readonly requestDone = () => {
    this.inFlight--;
    this.completed++;
    this.lastUsed = Date.now();
  };

  /**
   * While requests are in flight, samples the process's CPU time: a worker that keeps a core busy for
   * longer than the CPU limit without answering any request (an endless loop, a runaway computation)
   * is stopped. A worker busy with many requests that it keeps answering is not.
   */
  private watchCpu() {
    if (this.cpuTimer || this.child.pid === undefined) return;
    const pid = this.child.pid;
    let last = cpuTimeMs(pid);
    if (last === undefined) return;
    let busyMs = 0;
    let completed = this.completed;
    this.cpuTimer = setInterval(() => {
      const now = cpuTimeMs(pid);
      if (now === undefined || this.inFlight === 0) {
        clearInterval(this.cpuTimer);
        this.cpuTimer = undefined;
        return;
      }
      const progressed = this.completed !== completed;
      // CPU time spent while no request completes adds up, whatever share of a core the worker got (on a
      // busy machine a loop gets half a core and is still a loop).
      busyMs = progressed ? 0 : busyMs + (now - last!);
      last = now;
      completed = this.completed;
      if (busyMs >= this.limits.cpuMs) this.stop("limit");
    }, CPU_SAMPLE_MS);
    this.cpuTimer.unref();
  }

  stop(why: WorkerEnd = "exited") {
    this.ended ??= why;
    this.child.kill("SIGKILL");
    this.end(why);
  }

  private end(why: WorkerEnd) {
    this.ended ??= why;
    clearInterval(this.cpuTimer);
    this.child.stdin?.destroy();
    this.api?.close();
    // Requests in flight learn why first; then their connections go.
    for (const listener of this.endWaiters) listener(this.ended);
    this.endWaiters.clear();
    void this.connections.destroy();
    if (this.child.exitCode !== null || this.child.signalCode !== null) {
      rmSync(this.scratch, { recursive: true, force: true });
    }
  }
}
