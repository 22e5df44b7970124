import { claimOwner } from "./scratch";
import { Worker, type RuntimeFiles, type WorkerLimits, type WorkerSpec } from "./worker";

export interface PoolOptions extends WorkerLimits {
  maxWorkers: number;
  idleMs: number;
}

/** Thrown when every worker slot is serving and none can be freed. */
export class PoolExhausted extends Error {}

/**
 * Warm workers, one per function version and environment (`key`), reused by every request for it.
 * Bounded: starting one more stops the least recently used idle worker; idle workers stop after
 * `idleMs`. A new key for the same function (redeploy, changed secrets) retires the older worker once
 * its requests are done.
 */
export class WorkerPool {
  private readonly workers = new Map<string, { fn: string; worker: Worker }>();
  private readonly sweeper: NodeJS.Timeout;
  /** Names this pool's scratch directories, so another server's start-up leaves them alone. */
  private readonly owner = claimOwner();

  constructor(
    private readonly options: PoolOptions,
    private readonly runtime: RuntimeFiles,
  ) {
    this.sweeper = setInterval(() => this.sweep(), Math.min(options.idleMs, 10_000));
    this.sweeper.unref();
  }

  /** The running worker for `key`, if there is one. */
  running(key: string): Worker | undefined {
    const current = this.workers.get(key);
    return current && !current.worker.ended ? current.worker : undefined;
  }

  /** The running worker for `key`, started when there is none (synchronous: one start per key). */
  workerFor(
    fn: string,
    key: string,
    spec: WorkerSpec,
    onLine: (level: "log" | "error", line: string) => void,
  ): Worker {
    const running = this.running(key);
    if (running) return running;
    this.retireOthers(fn, key);
    this.makeRoom();
    const worker = new Worker(spec, this.options, this.runtime, onLine, this.owner.owner);
    this.workers.set(key, { fn, worker });
    worker.onEnd(() => {
      if (this.workers.get(key)?.worker === worker) this.workers.delete(key);
    });
    return worker;
  }

  /** Stops the workers of a function (deleted) at once. */
  stopFunction(fn: string) {
    for (const { fn: f, worker } of this.workers.values()) if (f === fn) worker.stop();
  }

  /** Stops the workers of every function of a project (deleted). */
  stopProject(ref: string) {
    for (const { fn, worker } of this.workers.values()) if (fn.startsWith(`${ref}/`)) worker.stop();
  }

  stopAll() {
    clearInterval(this.sweeper);
    for (const { worker } of this.workers.values()) worker.stop();
    this.workers.clear();
    this.owner.release();
  }

  private retireOthers(fn: string, key: string) {
    for (const [k, { fn: f, worker }] of this.workers) {
      if (f !== fn || k === key) continue;
      this.workers.delete(k);
      if (worker.inFlight === 0) worker.stop();
      else retireWhenIdle(worker);
    }
  }

  private makeRoom() {
    if (this.workers.size < this.options.maxWorkers) return;
    const idle = [...this.workers].filter(([, w]) => w.worker.inFlight === 0);
    if (!idle.length) throw new PoolExhausted("Every function worker is busy");
    idle.sort(([, a], [, b]) => a.worker.lastUsed - b.worker.lastUsed);
    const [key, { worker }] = idle[0];
    this.workers.delete(key);
    worker.stop();
  }

  private sweep() {
    const now = Date.now();
    for (const [key, { worker }] of this.workers) {
      if (worker.inFlight === 0 && now - worker.lastUsed > this.options.idleMs) {
        this.workers.delete(key);
        worker.stop();
      }
    }
  }
}

/** Stops a worker once its last request is done (checked every second). */
function retireWhenIdle(worker: Worker) {
  const timer = setInterval(() => {
    if (worker.inFlight > 0 && !worker.ended) return;
    clearInterval(timer);
    worker.stop();
  }, 1000);
  timer.unref();
}
