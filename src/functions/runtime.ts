import { mkdirSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import path from "node:path";
import type { AppContext } from "../context";
import { BOOTSTRAP_SOURCE } from "./bootstrap";
import { denoBinary } from "./deno";
import { denoCacheDir } from "./files";
import { FunctionLogs } from "./logs";
import { WorkerPool } from "./pool";

/** The running side of edge functions for one server: its worker pool and log writer. */
export interface FunctionRuntime {
  pool: WorkerPool;
  logs: FunctionLogs;
}

const runtimes = new WeakMap<AppContext, FunctionRuntime>();

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
      { deno: denoBinary(), bootstrap, denoDir: denoCacheDir(ctx.config.dataDir) },
    ),
    logs: new FunctionLogs(ctx),
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
  await runtime.logs.stop();
}

/** A deleted project: its workers stop and its functions' files go. */
export async function removeProjectFunctions(ctx: AppContext, ref: string) {
  runtimes.get(ctx)?.pool.stopProject(ref);
  await rm(path.join(ctx.config.dataDir, "functions", ref), { recursive: true, force: true });
}
