import type { AppContext } from "../context";
import { writeFunctionLogs, type FunctionLogRow } from "./gate";

const FLUSH_MS = 1000;
const MAX_PENDING = 10_000;
const MAX_LINE = 10_000;

/**
 * Function logs (printed lines and invocations), written to platform.function_logs in batches so that
 * an invocation never waits for its log row.
 */
export class FunctionLogs {
  private pending: FunctionLogRow[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly ctx: AppContext) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  add(row: Omit<FunctionLogRow, "at">) {
    // A function printing without end loses its oldest lines, not the server's memory.
    if (this.pending.length >= MAX_PENDING) this.pending.shift();
    this.pending.push({ ...row, message: row.message?.slice(0, MAX_LINE), at: new Date() });
  }

  async flush() {
    if (!this.pending.length) return;
    const rows = this.pending;
    this.pending = [];
    await writeFunctionLogs(this.ctx, rows).catch((err) =>
      this.ctx.log.warn({ err }, "function logs could not be written"),
    );
  }

  async stop() {
    clearInterval(this.timer);
    await this.flush();
  }
}
