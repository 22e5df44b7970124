import { mkdirSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import path from "node:path";
import type { AppContext } from "../context";
import { BOOTSTRAP_SOURCE } from "./bootstrap";
import { openApiChannel, type ApiChannel, type PublicApi } from "./channel";
import { denoBinary } from "./deno";
import { denoCacheDir } from "./files";
import { DeployedFunctions } from "./gate";
import { FunctionLogs } from "./logs";
import { WorkerPool } from "./pool";

/** The running side of edge functions for one server: its worker pool, deployed functions and log writer. */
export interface FunctionRuntime {
  pool: WorkerPool;
  /** The deployed functions and secrets, kept per node until a change is announced. */
  deployed: DeployedFunctions;
  logs: FunctionLogs;
  /** How a worker of the project gets the project's API on a socket (none before the server is made). */
  apiChannel(ref: string): ((socketPath: string) => ApiChannel) | undefined;
}

const runtimes = new WeakMap<AppContext, FunctionRuntime>();
const publicApis = new WeakMap<AppContext, PublicApi>();

/** The server's public HTTP handler, which functions reach their project's API through (channel.ts). */
export function setPublicApi(ctx: AppContext, api: PublicApi) {
  publicApis.set(ctx, api);
}

/** The server's function runtime, made on first use: writes the bootstrap module Deno starts from. */
export function functionRuntimeOf(ctx: AppContext): FunctionRuntime {
  let runtime = runtimes.get(ctx);
  if (runtime) return runtime;
  const dir = path.join(ctx.config.dataDir, "functions", ".runtime");
  mkdirSync(dir, { recursive: true });
  const bootstrap = path.join(dir, "bootstrap.js");
  writeFileSync(bootstrap, BOOTSTRAP_SOURCE);
  const { cpuMs, memoryMb, maxWorkers, idleMs } = ctx.config.functions;
  runtime = {
    pool: new WorkerPool(
      { cpuMs, memoryMb, maxWorkers, idleMs, bootMs: 30_000 },
      {
        deno: denoBinary(),
        bootstrap,
        denoDir: denoCacheDir(ctx.config.dataDir),
        dataDir: ctx.config.dataDir,
      },
    ),
    logs: new FunctionLogs(ctx),
    deployed: new DeployedFunctions(ctx),
    apiChannel(ref) {
      const api = publicApis.get(ctx);
      return api && ((socketPath) => openApiChannel(ctx, api, ref, socketPath));
    },
  };
  runtimes.set(ctx, runtime);
  return runtime;
}

/** Stops every worker and writes the last logs (server shutdown). */
export async function stopFunctionRuntime(ctx: AppContext) {
  const runtime = runtimes.get(ctx);
  if (!runtime) return;
  runtimes.delete(ctx);
  runtime.pool.stopAll();
  await Promise.all([runtime.logs.stop(), runtime.deployed.close()]);
}

/** A deleted project: its workers stop and its functions' files go. */
export async function removeProjectFunctions(ctx: AppContext, ref: string) {
  runtimes.get(ctx)?.pool.stopProject(ref);
  await rm(path.join(ctx.config.dataDir, "functions", ref), { recursive: true, force: true });
}
